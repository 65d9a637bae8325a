// result.h: the error model of the agent side of the agent link.
//
// The agent is loaded into arbitrary applications, so this code may not use
// Abseil (the app may bundle another copy) and must never throw into the app.
// Fallible functions return LinkStatus (an error message, empty when ok) or
// LinkResult<T> (a value or an error message). The daemon converts these to
// absl::Status at its edge (daemon/agent_link).
#ifndef KERNCAP_COMMON_AGENT_LINK_RESULT_H_
#define KERNCAP_COMMON_AGENT_LINK_RESULT_H_

#include <unistd.h>

#include <optional>
#include <string>
#include <utility>

namespace kerncap::link {

class [[nodiscard]] LinkStatus {
 public:
  LinkStatus() = default;
  static LinkStatus Ok() { return LinkStatus(); }
  static LinkStatus Error(std::string message) {
    LinkStatus s;
    s.message_ = message.empty() ? std::string("unknown error") : std::move(message);
    return s;
  }
  bool ok() const { return message_.empty(); }
  const std::string& message() const { return message_; }

 private:
  std::string message_;  // empty iff ok
};

template <typename T>
class [[nodiscard]] LinkResult {
 public:
  LinkResult(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design
  LinkResult(LinkStatus status)  // NOLINT: implicit by design
      : status_(status.ok() ? LinkStatus::Error("LinkResult built from an ok status")
                            : std::move(status)) {}
  bool ok() const { return value_.has_value(); }
  const LinkStatus& status() const { return status_; }
  const std::string& error() const { return status_.message(); }
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }
  T& operator*() { return *value_; }

 private:
  std::optional<T> value_;
  LinkStatus status_;
};

// Owns a file descriptor; closes it on destruction.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) reset(other.release());
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

}  // namespace kerncap::link

#endif  // KERNCAP_COMMON_AGENT_LINK_RESULT_H_
