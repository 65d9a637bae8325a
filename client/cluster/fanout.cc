#include "client/cluster/fanout.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <memory>

extern char** environ;

namespace kerncap::cluster {
namespace {

using Clock = std::chrono::steady_clock;

double Since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

struct Child {
  size_t index = 0;
  pid_t pid = -1;
  int fds[2] = {-1, -1};  // stdout, stderr read ends
  Clock::time_point start;
  bool term_sent = false;
  Clock::time_point term_at;
  bool reaped = false;
  Clock::time_point reaped_at;
};

void CloseFd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

// Starts `cmd` in a process group of its own (so the deadline reaches what it
// starts, e.g. srun's helpers), stdin from /dev/null.
std::string Spawn(const NodeCommand& cmd, Child& child) {
  if (cmd.argv.empty()) return "empty command";
  int out[2], err[2];
  if (::pipe2(out, O_CLOEXEC) != 0) return std::string("pipe: ") + std::strerror(errno);
  if (::pipe2(err, O_CLOEXEC) != 0) {
    ::close(out[0]);
    ::close(out[1]);
    return std::string("pipe: ") + std::strerror(errno);
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  posix_spawn_file_actions_adddup2(&fa, err[1], 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK);
  posix_spawnattr_setpgroup(&attr, 0);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  std::vector<char*> argv;
  for (const std::string& a : cmd.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  int rc = ::posix_spawnp(&child.pid, argv[0], &fa, &attr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  ::close(out[1]);
  ::close(err[1]);
  if (rc != 0) {
    ::close(out[0]);
    ::close(err[0]);
    child.pid = -1;
    return cmd.argv[0] + ": " + std::strerror(rc);
  }
  child.fds[0] = out[0];
  child.fds[1] = err[0];
  for (int fd : child.fds) ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  child.start = Clock::now();
  return "";
}

}  // namespace

std::vector<NodeOutcome> RunFanout(const std::vector<NodeCommand>& commands,
                                   const FanoutOptions& options) {
  std::vector<NodeOutcome> results(commands.size());
  for (size_t i = 0; i < commands.size(); ++i) results[i].node = commands[i].node;
  const size_t concurrency = std::max<size_t>(1, options.concurrency);
  size_t next = 0;
  std::deque<std::unique_ptr<Child>> active;

  auto finish = [&](Child& c) {
    for (int& fd : c.fds) CloseFd(fd);
    results[c.index].seconds = Since(c.start);
    if (options.on_done) options.on_done(results[c.index]);
  };

  while (next < commands.size() || !active.empty()) {
    while (next < commands.size() && active.size() < concurrency) {
      auto c = std::make_unique<Child>();
      c->index = next;
      std::string e = Spawn(commands[next], *c);
      ++next;
      if (!e.empty()) {
        results[c->index].spawn_error = e;
        if (options.on_done) options.on_done(results[c->index]);
        continue;
      }
      active.push_back(std::move(c));
    }
    if (active.empty()) continue;

    // Wait for output or the nearest deadline (at most 100 ms, to reap).
    std::vector<pollfd> pfds;
    std::vector<std::pair<Child*, int>> owners;
    for (auto& c : active) {
      for (int s = 0; s < 2; ++s) {
        if (c->fds[s] < 0) continue;
        pfds.push_back({c->fds[s], POLLIN, 0});
        owners.push_back({c.get(), s});
      }
    }
    ::poll(pfds.data(), pfds.size(), pfds.empty() ? 20 : 100);
    char buf[65536];
    for (size_t p = 0; p < pfds.size(); ++p) {
      if (!(pfds[p].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      Child* c = owners[p].first;
      int s = owners[p].second;
      NodeOutcome& r = results[c->index];
      for (;;) {
        ssize_t n = ::read(c->fds[s], buf, sizeof buf);
        if (n > 0) {
          std::string& dst = s == 0 ? r.out : r.err;
          size_t room = options.max_output > dst.size() ? options.max_output - dst.size() : 0;
          if (static_cast<size_t>(n) > room) r.truncated = true;
          dst.append(buf, std::min<size_t>(n, room));
          if (s == 0 && options.on_output) options.on_output(r.node, std::string(buf, n));
          continue;
        }
        if (n == 0 || (errno != EAGAIN && errno != EINTR)) CloseFd(c->fds[s]);
        break;
      }
    }

    for (auto it = active.begin(); it != active.end();) {
      Child& c = **it;
      NodeOutcome& r = results[c.index];
      if (!c.reaped) {
        int status = 0;
        pid_t w = ::waitpid(c.pid, &status, WNOHANG);
        if (w == c.pid) {
          c.reaped = true;
          c.reaped_at = Clock::now();
          if (WIFEXITED(status) && !c.term_sent) r.exit_code = WEXITSTATUS(status);
          // Whatever it left behind in its group goes with it.
          ::kill(-c.pid, SIGKILL);
        }
      }
      if (!c.reaped && options.timeout_s > 0 && Since(c.start) > options.timeout_s) {
        if (!c.term_sent) {
          r.timed_out = true;
          c.term_sent = true;
          c.term_at = Clock::now();
          ::kill(-c.pid, SIGTERM);
        } else if (Since(c.term_at) > options.kill_grace_s) {
          ::kill(-c.pid, SIGKILL);
        }
      }
      // Done once reaped and its pipes closed (or 1 s after the exit, when
      // something it started still holds them).
      bool pipes_open = c.fds[0] >= 0 || c.fds[1] >= 0;
      if (c.reaped && (!pipes_open || Since(c.reaped_at) > 1.0)) {
        finish(c);
        it = active.erase(it);
      } else {
        ++it;
      }
    }
  }
  return results;
}

}  // namespace kerncap::cluster
