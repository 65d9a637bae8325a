// progress.h: a one-line progress bar on stderr for long transfers (import,
// export, pull, verify, repro), with the rate and, when the total is known,
// the time left. Draws only when stderr is a terminal, at most ~10
// times a second, so piping or logging kerncapctl produces no noise.
#ifndef KERNCAP_CLIENT_KERNCAPCTL_PROGRESS_H_
#define KERNCAP_CLIENT_KERNCAPCTL_PROGRESS_H_

#include <chrono>
#include <cstdint>
#include <string>

namespace kerncap::ctl {

class ProgressBar {
 public:
  // `bytes`: show done/total as sizes, else as counts.
  ProgressBar(std::string label, uint64_t total, bool bytes);
  ProgressBar(std::string label, uint64_t total, bool bytes, bool enabled);
  ~ProgressBar();

  void SetTotal(uint64_t total) { total_ = total; }
  void Update(uint64_t done);
  // Draws the final state and ends the line.
  void Finish();

  // The text drawn for a state (exposed for tests): the bar and percentage
  // (a total of 0 means unknown: no bar), the rate once `elapsed_s` > 0,
  // and the time left at that rate when the total is known.
  static std::string Render(const std::string& label, uint64_t done, uint64_t total, bool bytes,
                            int width, double elapsed_s = 0);
  // "42s", "3m05s", "1h02m".
  static std::string Duration(double seconds);

 private:
  std::string label_;
  uint64_t total_;
  bool bytes_;
  bool enabled_;
  bool drawn_ = false;
  bool finished_ = false;
  uint64_t done_ = 0;
  std::chrono::steady_clock::time_point last_draw_{};
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

}  // namespace kerncap::ctl

#endif  // KERNCAP_CLIENT_KERNCAPCTL_PROGRESS_H_
