#include "client/kerncapctl/progress.h"

#include <unistd.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
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

std::string ProgressBar::Duration(double seconds) {
  const long s = static_cast<long>(seconds + 0.5);
  if (s < 60) return absl::StrCat(s, "s");
  if (s < 3600) return absl::StrFormat("%ldm%02lds", s / 60, s % 60);
  return absl::StrFormat("%ldh%02ldm", s / 3600, (s % 3600) / 60);
}

std::string ProgressBar::Render(const std::string& label, uint64_t done, uint64_t total, bool bytes,
                                int width, double elapsed_s) {
  auto fmt = [bytes](uint64_t v) { return bytes ? HumanBytes(v) : absl::StrCat(v); };
  std::string text;
  const uint64_t shown = total == 0 ? done : std::min(done, total);
  if (total == 0) {
    text = absl::StrCat(label, " ", fmt(shown));
  } else {
    const double frac = static_cast<double>(shown) / static_cast<double>(total);
    const int filled = static_cast<int>(frac * width);
    std::string bar = absl::StrCat(std::string(filled, '#'), std::string(width - filled, '.'));
    text = absl::StrCat(label, " [", bar, "] ", static_cast<int>(frac * 100), "% ", fmt(shown),
                        "/", fmt(total));
  }
  if (elapsed_s > 0 && shown > 0) {
    const double rate = static_cast<double>(shown) / elapsed_s;
    absl::StrAppend(&text, "  ", bytes ? HumanBytes(static_cast<uint64_t>(rate)) : absl::StrFormat("%.0f", rate),
                    "/s");
    if (total > shown) {
      absl::StrAppend(&text, "  ", Duration(static_cast<double>(total - shown) / rate), " left");
    } else if (total != 0) {
      absl::StrAppend(&text, "  in ", Duration(elapsed_s));
    }
  }
  return text;
}

void ProgressBar::Update(uint64_t done) {
  done_ = done;
  if (!enabled_) return;
  auto now = std::chrono::steady_clock::now();
  if (drawn_ && now - last_draw_ < std::chrono::milliseconds(100)) return;
  last_draw_ = now;
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  std::string line =
      absl::StrCat("\r", Render(label_, done_, total_, bytes_, 30, elapsed), "\x1b[K");
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
