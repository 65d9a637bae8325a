#include "client/kerncapctl/progress.h"

#include <unistd.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "client/kerncapctl/output.h"

namespace kerncap::ctl {

ProgressBar::ProgressBar(std::string label, uint64_t total, bool bytes)
    : ProgressBar(std::move(label), total, bytes, ::isatty(STDERR_FILENO) == 1) {}

ProgressBar::ProgressBar(std::string label, uint64_t total, bool bytes, bool enabled)
    : label_(std::move(label)), total_(total), bytes_(bytes), enabled_(enabled) {}

ProgressBar::~ProgressBar() {
  if (drawn_ && !finished_) {
    std::string nl = "\n";
    ssize_t ignored = ::write(STDERR_FILENO, nl.data(), nl.size());
    (void)ignored;
  }
}

std::string ProgressBar::Render(const std::string& label, uint64_t done, uint64_t total, bool bytes,
                                int width) {
  auto fmt = [bytes](uint64_t v) { return bytes ? HumanBytes(v) : absl::StrCat(v); };
  const uint64_t shown = total == 0 ? done : std::min(done, total);
  const double frac = total == 0 ? 1.0 : static_cast<double>(shown) / static_cast<double>(total);
  const int filled = static_cast<int>(frac * width);
  std::string bar = absl::StrCat(std::string(filled, '#'), std::string(width - filled, '.'));
  return absl::StrCat(label, " [", bar, "] ", static_cast<int>(frac * 100), "% ", fmt(shown), "/",
                      fmt(total));
}

void ProgressBar::Update(uint64_t done) {
  done_ = done;
  if (!enabled_) return;
  auto now = std::chrono::steady_clock::now();
  if (drawn_ && now - last_draw_ < std::chrono::milliseconds(100)) return;
  last_draw_ = now;
  std::string line = absl::StrCat("\r", Render(label_, done_, total_, bytes_, 30), "\x1b[K");
  ssize_t ignored = ::write(STDERR_FILENO, line.data(), line.size());
  (void)ignored;
  drawn_ = true;
}

void ProgressBar::Finish() {
  if (!enabled_ || finished_) return;
  drawn_ = false;  // force a redraw
  Update(done_);
  std::string nl = "\n";
  ssize_t ignored = ::write(STDERR_FILENO, nl.data(), nl.size());
  (void)ignored;
  finished_ = true;
}

}  // namespace kerncap::ctl
