#include "daemon/agent_link/agent_link_server.h"

#include <errno.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <optional>
#include <string_view>
#include <system_error>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/agent_link/messages.h"
#include "common/errno_status.h"
#include "common/file_util.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "daemon/agent_link/link_ids.h"
#include "daemon/agent_link/wire_convert.h"

namespace kerncap::link {
namespace {

int64_t NowMs() { return absl::ToUnixMillis(absl::Now()); }

// Agents a fan-out serves at once (one thread each).
constexpr size_t kMaxFanOutThreads = 64;

// Runs fn(i) for i in [0, n), on up to kMaxFanOutThreads threads, and waits
// for all: each agent's bounded time then bounds the whole fan-out.
template <typename Fn>
void FanOut(size_t n, Fn fn) {
  if (n == 0) return;
  if (n == 1) {
    fn(size_t{0});
    return;
  }
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next.fetch_add(1); i < n; i = next.fetch_add(1)) fn(i);
  };
  std::vector<std::thread> threads;
  const size_t count = std::min(n, kMaxFanOutThreads);
  threads.reserve(count);
  for (size_t t = 0; t < count; ++t) {
    try {
      threads.emplace_back(work);
    } catch (const std::system_error&) {
      break;  // fewer threads: the calling thread works too
    }
  }
  work();
  for (std::thread& t : threads) t.join();
}

// A shared byte budget for census answers: the whole answer's bound, and the
// daemon's bytes of all census answers being built at once.
class CensusBytes : public AgentConnection::CensusBudget {
 public:
  CensusBytes(uint64_t max_answer, uint64_t max_in_flight, std::atomic<uint64_t>* in_flight)
      : max_answer_(max_answer), max_in_flight_(max_in_flight), in_flight_(in_flight) {}
  ~CensusBytes() override { in_flight_->fetch_sub(charged_.load()); }
  std::string Charge(uint64_t bytes) override {
    uint64_t mine = charged_.load();
    do {
      if (max_answer_ > 0 && mine + bytes > max_answer_) {
        return absl::StrCat("the answer reached ", max_answer_,
                            " bytes of kernel names, its bound for all agents together "
                            "(--census-total-mib)");
      }
    } while (!charged_.compare_exchange_weak(mine, mine + bytes));
    uint64_t all = in_flight_->load();
    do {
      if (max_in_flight_ > 0 && all + bytes > max_in_flight_) {
        charged_.fetch_sub(bytes);
        return absl::StrCat("census answers being built at once hold ", max_in_flight_,
                            " bytes, the daemon's bound (other ListKernels calls are running; "
                            "ask again)");
      }
    } while (!in_flight_->compare_exchange_weak(all, all + bytes));
    return "";
  }

 private:
  const uint64_t max_answer_;
  const uint64_t max_in_flight_;
  std::atomic<uint64_t>* in_flight_;
  std::atomic<uint64_t> charged_{0};
};

}  // namespace

AgentLinkServer::AgentLinkServer() = default;

AgentLinkServer::~AgentLinkServer() { Shutdown(/*discard_in_flight=*/true); }

absl::Status AgentLinkServer::Start(const AgentLinkServerOptions& options, CaptureSink& sink,
                                    EventBus& events) {
  {
    absl::MutexLock lock(&mu_);
    if (started_) return absl::FailedPreconditionError("agent link server already started");
  }
  if (options.socket_path.empty()) return absl::InvalidArgumentError("agent socket path empty");
  RingLayout layout{options.slot_size, options.slot_count};
  std::string bad = ValidateRingLayout(layout, options.chunk_size);
  if (!bad.empty()) return absl::InvalidArgumentError(bad);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (options.socket_path.size() >= sizeof(addr.sun_path)) {
    return absl::InvalidArgumentError(
        absl::StrCat("agent socket path too long: ", options.socket_path));
  }
  memcpy(addr.sun_path, options.socket_path.data(), options.socket_path.size());
  // The socket folder is 0750 like the control socket's (kerncapd shares
  // it): created so, and tightened if this server created it.
  {
    const std::string dir = DirName(options.socket_path);
    struct stat dir_st;
    const bool existed = ::stat(dir.c_str(), &dir_st) == 0;
    KC_RETURN_IF_ERROR(MakeDirs(dir, 0750));
    if (!existed && ::chmod(dir.c_str(), 0750) != 0) {
      return ErrnoError(errno, absl::StrCat("chmod ", dir));
    }
    if (!existed && options.socket_group >= 0 &&
        ::chown(dir.c_str(), static_cast<uid_t>(-1), static_cast<gid_t>(options.socket_group)) !=
            0) {
      return ErrnoError(errno, absl::StrCat("chgrp ", dir));
    }
  }

  struct stat st;
  if (::lstat(options.socket_path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      return absl::FailedPreconditionError(
          absl::StrCat(options.socket_path, " exists and is not a socket"));
    }
    LinkResult<UniqueFd> probe = ConnectUnix(options.socket_path);
    if (probe.ok()) {
      return absl::AlreadyExistsError(
          absl::StrCat("another daemon is serving agents on ", options.socket_path));
    }
    // Nobody listens: a dead daemon's leftover.
    log::Info("agent_link.stale_socket", {{"path", options.socket_path}});
    if (::unlink(options.socket_path.c_str()) != 0 && errno != ENOENT) {
      return ErrnoError(errno, absl::StrCat("unlink ", options.socket_path));
    }
  }
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return ErrnoError(errno, "socket");
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    return ErrnoError(errno, absl::StrCat("bind ", options.socket_path));
  }
  if (::chmod(options.socket_path.c_str(), options.socket_mode) != 0 ||
      (options.socket_group >= 0 &&
       ::chown(options.socket_path.c_str(), static_cast<uid_t>(-1),
               static_cast<gid_t>(options.socket_group)) != 0) ||
      ::lstat(options.socket_path.c_str(), &st) != 0) {
    int err = errno;
    ::unlink(options.socket_path.c_str());
    return ErrnoError(err, absl::StrCat("chmod ", options.socket_path));
  }
  if (::listen(fd.get(), 128) != 0) {
    int err = errno;
    ::unlink(options.socket_path.c_str());
    return ErrnoError(err, "listen");
  }
  UniqueFd wake(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!wake.valid()) return ErrnoError(errno, "eventfd");

  options_ = options;
  ring_budget_.set_max_total_bytes(options.max_total_ring_bytes > 0
                                       ? options.max_total_ring_bytes
                                       : options.default_total_ring_bytes);
  ring_budget_.set_max_pinned_share(options.max_pinned_ring_share);
  arms_.set_max_finished(options.max_finished_arms);
  arms_.set_max_active(options.max_active_arms, options.max_active_arms_per_owner);
  sink_ = &sink;
  events_ = &events;
  listen_fd_ = std::move(fd);
  wake_fd_ = std::move(wake);
  socket_dev_ = st.st_dev;
  socket_ino_ = st.st_ino;
  {
    absl::MutexLock lock(&mu_);
    started_ = true;
  }
  accept_thread_ = std::thread([this] { AcceptLoop(); });
  log::Info("agent_link.listening", {{"path", options_.socket_path},
                                     {"slot_size", options_.slot_size},
                                     {"slot_count", options_.slot_count}});
  return absl::OkStatus();
}

void AgentLinkServer::Wake() {
  uint64_t one = 1;
  if (wake_fd_.valid()) (void)!::write(wake_fd_.get(), &one, sizeof(one));
}

void AgentLinkServer::AcceptLoop() {
  while (!stopping_) {
    const int timeout_ms = arms_.MsUntilNextExpiry(NowMs(), 1000);
    pollfd fds[2] = {{listen_fd_.get(), POLLIN, 0}, {wake_fd_.get(), POLLIN, 0}};
    int n = ::poll(fds, 2, timeout_ms);
    if (n < 0 && errno != EINTR) {
      log::Error("agent_link.poll_failed", {{"error", strerror(errno)}});
      break;
    }
    if (fds[1].revents & POLLIN) {
      uint64_t v;
      (void)!::read(wake_fd_.get(), &v, sizeof(v));
    }
    ExpireArms();
    ReapFinished();
    DropRingHolders();
    if (stopping_) break;
    if (n <= 0 || !(fds[0].revents & POLLIN)) continue;
    UniqueFd client(::accept4(listen_fd_.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (!client.valid()) continue;
    auto conn = std::make_shared<AgentConnection>(host(), options_, *events_, std::move(client));
    absl::MutexLock lock(&mu_);
    if (static_cast<int>(all_connections_.size()) >= options_.max_agents) {
      log::Warn("agent_link.refused", {{"reason", "too many agents"}});
      conn->Refuse("too many agents connected");
      continue;
    }
    all_connections_.push_back(conn);
    conn->StartThread([this, conn] { Serve(conn); });
  }
}

void AgentLinkServer::Serve(std::shared_ptr<AgentConnection> conn) {
  LinkStatus status = conn->Handshake();
  if (status.ok()) {
    v1::Event joined;
    *joined.mutable_agent_joined() = conn->info();
    joined.set_owner_uid(conn->uid());
    events_->Publish(std::move(joined));
    log::Info("agent_link.joined", {{"agent", conn->agent_id()},
                                    {"pid", conn->hello().pid},
                                    {"uid", conn->uid()},
                                    {"process", conn->hello().process_name}});
    status = conn->ServeFrames();
  }
  if (!status.ok() && !stopping_) {
    log::Warn("agent_link.disconnect",
              {{"agent", conn->agent_id()}, {"reason", status.message()}});
    ErrorMsg err;
    err.message = status.message();
    (void)conn->Send(err);
  }
  conn->Cleanup(status.ok() ? std::string() : status.message());
  bool was_registered = conn->registered();
  {
    absl::MutexLock lock(&mu_);
    if (was_registered) agents_.erase(conn->agent_id());
    finished_.push_back(conn);
  }
  if (was_registered) {
    substitutions_.OnAgentGone(conn->agent_id(), NowMs());
    v1::Event left;
    *left.mutable_agent_left() = conn->info();
    left.set_owner_uid(conn->uid());
    events_->Publish(std::move(left));
    log::Info("agent_link.left", {{"agent", conn->agent_id()}});
  }
  Wake();
}

void AgentLinkServer::ServeForTesting(UniqueFd fd) {
  auto conn = std::make_shared<AgentConnection>(host(), options_, *events_, std::move(fd));
  {
    absl::MutexLock lock(&mu_);
    all_connections_.push_back(conn);
  }
  Serve(conn);  // ends by queueing it for ReapFinished (no thread to join)
}

void AgentLinkServer::ReapFinished() {
  std::vector<std::shared_ptr<AgentConnection>> done;
  {
    absl::MutexLock lock(&mu_);
    done.swap(finished_);
    for (const auto& c : done) {
      all_connections_.erase(std::remove(all_connections_.begin(), all_connections_.end(), c),
                             all_connections_.end());
    }
  }
  for (auto& c : done) c->Join();
}

void AgentLinkServer::IngestFinished() {
  absl::MutexLock lock(&mu_);  // Shutdown awaits the counter under mu_
  ingests_in_flight_.fetch_sub(1);
}

void AgentLinkServer::Shutdown(bool discard_in_flight) {
  {
    absl::MutexLock lock(&mu_);
    if (!started_ || shut_down_) return;
    shut_down_ = true;
  }
  draining_ = true;
  if (!discard_in_flight) {
    absl::MutexLock lock(&mu_);
    auto idle = [this]() { return ingests_in_flight_.load() == 0; };
    mu_.AwaitWithTimeout(absl::Condition(&idle), options_.drain_timeout);
  }
  stopping_ = true;
  Wake();
  if (accept_thread_.joinable()) accept_thread_.join();
  // Unlink only our own socket file (a newer daemon may already own the path).
  struct stat st;
  if (::lstat(options_.socket_path.c_str(), &st) == 0 && st.st_dev == socket_dev_ &&
      st.st_ino == socket_ino_) {
    ::unlink(options_.socket_path.c_str());
  }
  listen_fd_.reset();
  std::vector<std::shared_ptr<AgentConnection>> conns;
  {
    absl::MutexLock lock(&mu_);
    conns = all_connections_;
  }
  for (auto& c : conns) c->Kick();
  for (auto& c : conns) c->Join();
  absl::MutexLock lock(&mu_);
  all_connections_.clear();
  finished_.clear();
  agents_.clear();
}

std::vector<std::shared_ptr<AgentConnection>> AgentLinkServer::ConnectionsSnapshot() {
  absl::MutexLock lock(&mu_);
  std::vector<std::shared_ptr<AgentConnection>> out;
  out.reserve(agents_.size());
  for (auto& [id, c] : agents_) out.push_back(c);
  return out;
}

std::vector<v1::AgentInfo> AgentLinkServer::ListAgents(const Caller& caller) {
  std::vector<v1::AgentInfo> out;
  for (auto& c : ConnectionsSnapshot()) {
    if (caller.MayReach(c->uid())) out.push_back(c->info());
  }
  return out;
}

v1::ListKernelsResponse AgentLinkServer::ListKernels(const v1::ListKernelsRequest& request,
                                                     const Caller& caller) {
  Selector process;
  process.pid = request.pid();
  process.process_name = request.process_name();
  std::vector<std::shared_ptr<AgentConnection>> targets;
  for (auto& c : ConnectionsSnapshot()) {
    if (!caller.MayReach(c->uid())) continue;
    if (!request.agent_id().empty() && c->agent_id() != request.agent_id()) continue;
    if (!MatchesProcess(process, c->hello().pid, c->hello().process_name)) continue;
    targets.push_back(std::move(c));
  }
  v1::ListKernelsResponse response;
  response.set_max_kernels_per_agent(options_.max_census_kernels);
  response.set_max_bytes_per_agent(options_.max_census_bytes_per_agent);
  response.set_max_total_bytes(options_.max_census_total_bytes);
  // Held until the answer is built (the caller's copy is the gRPC layer's).
  CensusBytes budget(options_.max_census_total_bytes, options_.max_census_bytes_in_flight,
                     &census_bytes_in_flight_);
  std::vector<absl::StatusOr<AgentConnection::KernelCensus>> results(
      targets.size(), absl::UnknownError("not asked"));
  const bool sampling = request.sample_ms() > 0;
  std::vector<absl::StatusOr<SampleReportMsg>> samples(targets.size(),
                                                       absl::UnknownError("not asked"));
  {
    // Every agent at once: the sample first (modules its launches load are
    // then in the census), then the census.
    FanOut(targets.size(), [&](size_t i) {
      if (sampling) {
        samples[i] = targets[i]->SampleLaunches(absl::Milliseconds(request.sample_ms()),
                                                options_.census_timeout);
      }
      results[i] = targets[i]->RequestKernels(options_.census_timeout,
                                              options_.max_census_kernels,
                                              options_.max_census_bytes_per_agent, &budget);
    });
  }
  for (size_t i = 0; i < targets.size(); ++i) {
    v1::AgentKernels* a = response.add_agents();
    *a->mutable_agent() = targets[i]->info();
    if (sampling && !samples[i].ok()) {
      a->set_sample_error(std::string(samples[i].status().message()));
    }
    if (!results[i].ok()) {
      a->set_error(std::string(results[i].status().message()));
    } else {
      a->set_left_out(results[i]->left_out);
      a->set_truncated(results[i]->truncated);
      if (!results[i]->truncated.empty()) {
        log::Warn("census.truncated", {{"agent", targets[i]->agent_id()},
                                       {"kept", results[i]->kernels.size()},
                                       {"left_out", results[i]->left_out},
                                       {"reason", results[i]->truncated}});
      }
      for (LoadedKernelInfo& k : results[i]->kernels) {
        v1::LoadedKernel* out = a->add_kernels();
        out->set_mangled_name(std::move(k.mangled_name));
        out->set_demangled_name(std::move(k.demangled_name));
        out->set_module(std::move(k.module));
      }
    }
    if (sampling && samples[i].ok()) MergeLaunchSample(*samples[i], a);
  }
  return response;
}

void AgentLinkServer::MergeLaunchSample(const SampleReportMsg& sample, v1::AgentKernels* a) {
  a->set_sampled(true);
  a->set_sample_seconds(sample.seconds);
  a->set_unattributed_launches(sample.unattributed_launches);
  a->set_graph_launches(sample.graph_launches);
  a->set_sampled_kernels_left_out(sample.kernels_left_out);
  // Counted per kernel name: the first census entry of that name carries
  // them (the agent counts by name, not by module).
  std::map<std::string_view, v1::LoadedKernel*> first_of;
  for (v1::LoadedKernel& k : *a->mutable_kernels()) first_of.emplace(k.mangled_name(), &k);
  std::vector<std::pair<const SampledKernel*, v1::LoadedKernel*>> fill;
  std::vector<const SampledKernel*> missing;
  for (const SampledKernel& s : sample.kernels) {
    auto it = first_of.find(s.mangled_name);
    if (it != first_of.end()) {
      fill.emplace_back(&s, it->second);
    } else {
      missing.push_back(&s);
    }
  }
  auto set_counts = [](const SampledKernel& s, v1::LoadedKernel* out) {
    out->set_launches(s.launches);
    out->set_other_config_launches(s.other_config_launches);
    out->set_argument_shapes(s.argument_shapes);
    out->set_argument_shapes_capped(s.argument_shapes_capped);
    for (const SampledConfig& c : s.configs) {
      v1::LaunchConfigCount* o = out->add_launch_configs();
      for (uint32_t v : c.grid) o->add_grid(v);
      for (uint32_t v : c.block) o->add_block(v);
      for (uint32_t v : c.cluster) o->add_cluster(v);
      o->set_shared_mem_bytes(c.shared_mem_bytes);
      o->set_launches(c.launches);
    }
  };
  for (auto& [s, out] : fill) set_counts(*s, out);
  // (after the pointers into the list are used: adding may move entries)
  for (const SampledKernel* s : missing) {
    v1::LoadedKernel* out = a->add_kernels();
    out->set_mangled_name(s->mangled_name);
    out->set_demangled_name(s->demangled_name);
    set_counts(*s, out);
  }
}

int AgentLinkServer::IngestsInFlight() { return ingests_in_flight_.load(); }

absl::StatusOr<v1::SubstitutionInfo> AgentLinkServer::Substitute(
    const v1::SubstituteRequest& request, const Caller& caller, const std::string& preflight) {
  const v1::Selector& sel = request.selector();
  if (sel.kernel().empty()) {
    return absl::InvalidArgumentError("selector.kernel: a substitution names its kernel");
  }
  if (sel.skip() != 0 || sel.nth() != 0 || sel.count() != 0) {
    return absl::InvalidArgumentError(
        "selector.skip/nth/count do not apply to a substitution (use SubstituteRequest.count)");
  }
  CodeObjectFormat format = CodeObjectFormat::kUnspecified;
  if (!ParseWireName(request.format(), &format) ||
      (format != CodeObjectFormat::kCubin && format != CodeObjectFormat::kFatbin &&
       format != CodeObjectFormat::kPtx)) {
    return absl::InvalidArgumentError("format must be cubin, fatbin or ptx, not '" +
                                      request.format().substr(0, 64) + "'");
  }
  if (request.code_object().empty()) return absl::InvalidArgumentError("code_object is empty");
  if (request.code_object().size() > kMaxSubstituteCodeObjectBytes) {
    return absl::InvalidArgumentError(absl::StrCat("code_object has ", request.code_object().size(),
                                                   " bytes, more than the ",
                                                   kMaxSubstituteCodeObjectBytes, " allowed"));
  }
  if (request.name().size() > options_.capture_limits.max_name_bytes ||
      preflight.size() > 64 * 1024) {
    return absl::InvalidArgumentError("name or preflight too long");
  }
  Selector selector = SelectorFromProto(sel, 0);
  std::string bad = ValidateSelector(selector);
  if (!bad.empty()) return absl::InvalidArgumentError(bad);
  LinkResult<NameMatcher> matcher = NameMatcher::Compile(selector.kernel, selector.match);
  if (!matcher.ok()) return absl::InvalidArgumentError("selector.kernel: " + matcher.error());

  v1::SubstitutionInfo info;
  info.set_substitution_id(RandomLinkId("sub-"));
  *info.mutable_selector() = sel;
  info.set_created_unix_ms(NowMs());
  info.set_count(request.count());
  info.set_ttl_ms(request.ttl_ms());
  info.set_ab(request.ab());
  info.set_name(request.name());
  info.set_format(std::string(WireName(format)));
  info.set_code_object_bytes(request.code_object().size());
  info.set_preflight(preflight);
  info.set_owner_uid(caller.uid);

  SubstituteMsg push;
  push.sub_id = info.substitution_id();
  push.kernel = selector.kernel;
  push.match = selector.match;
  push.pid = selector.pid;
  push.process_name = selector.process_name;
  push.device = selector.device;
  push.count = request.count();
  push.ttl_ms = request.ttl_ms();
  push.ab = request.ab();
  push.format = format;
  push.name = request.name();

  std::vector<std::shared_ptr<AgentConnection>> targets;
  {
    absl::MutexLock lock(&mu_);
    if (shut_down_ || !started_) return absl::UnavailableError("agent link is not serving");
    for (auto& [id, c] : agents_) {
      // Code goes only into the caller's own processes (every process for
      // a privileged caller).
      if (!caller.MayReach(c->uid())) continue;
      if (!HasFeature(c->hello().features, kFeatureSubstitution)) continue;
      if (MatchesProcess(selector, c->hello().pid, c->hello().process_name,
                         c->hello().rank.rank)) {
        targets.push_back(c);
      }
    }
  }
  if (targets.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "no connected agent of yours (", caller.description,
        ") matches the selector's process and offers substitution"));
  }
  // Recorded before the push, so a report that comes back at once finds it.
  std::vector<v1::SubstitutionAgentResult> results;
  for (auto& c : targets) {
    v1::SubstitutionAgentResult r;
    r.set_agent_id(c->agent_id());
    r.set_pid(c->hello().pid);
    r.set_process_name(c->hello().process_name);
    r.set_state(std::string(WireName(SubstitutionState::kPending)));
    r.set_updated_unix_ms(NowMs());
    results.push_back(std::move(r));
  }
  substitutions_.Add(info, results);
  std::atomic<size_t> sent{0};
  FanOut(targets.size(), [&](size_t i) {
    AgentConnection& c = *targets[i];
    LinkStatus st = c.SendWithinDeferKick(options_.fanout_timeout, push, request.code_object());
    if (st.ok()) {
      ++sent;
    } else {
      SubstitutionReportMsg failed;
      failed.sub_id = push.sub_id;
      failed.state = SubstitutionState::kRefused;
      failed.reason = "the agent did not take the code object within the daemon's per-agent "
                      "bound (--fanout-timeout " + absl::FormatDuration(options_.fanout_timeout) +
                      "): " + st.message();
      substitutions_.OnReport(c.agent_id(), failed, NowMs());
      c.Kick();  // after the refusal is recorded: its disconnect then finds it final
    }
  });
  log::Info("substitution.created", {{"substitution", push.sub_id},
                                     {"kernel", selector.kernel},
                                     {"code_object", request.name()},
                                     {"bytes", request.code_object().size()},
                                     {"ab", request.ab()},
                                     {"agents", sent.load()}});
  std::optional<v1::SubstitutionInfo> now = substitutions_.Get(push.sub_id);
  return now ? *now : info;
}

absl::StatusOr<v1::SubstitutionInfo> AgentLinkServer::Unsubstitute(const std::string& id,
                                                                   const Caller& caller) {
  if (std::optional<v1::SubstitutionInfo> known = substitutions_.Get(id);
      !known || !caller.MayReach(known->owner_uid())) {
    return absl::NotFoundError("no substitution " + id);
  }
  std::optional<std::vector<std::string>> holders =
      substitutions_.End(id, "unsubstituted", NowMs());
  if (!holders) return absl::NotFoundError("no substitution " + id);
  UnsubstituteMsg msg;
  msg.sub_id = id;
  msg.reason = UnsubstituteReason::kUnsubstituted;
  std::vector<std::shared_ptr<AgentConnection>> targets;
  {
    absl::MutexLock lock(&mu_);
    for (const std::string& agent : *holders) {
      auto it = agents_.find(agent);
      if (it != agents_.end()) targets.push_back(it->second);
    }
  }
  FanOut(targets.size(),
         [&](size_t i) { (void)targets[i]->SendWithin(options_.fanout_timeout, msg); });
  log::Info("substitution.ended", {{"substitution", id}, {"agents", targets.size()}});
  std::optional<v1::SubstitutionInfo> info = substitutions_.Get(id);
  if (!info) return absl::NotFoundError("no substitution " + id);
  return *info;
}

std::vector<v1::SubstitutionInfo> AgentLinkServer::ListSubstitutions(bool include_finished,
                                                                     const Caller& caller) {
  std::vector<v1::SubstitutionInfo> out;
  for (v1::SubstitutionInfo& s : substitutions_.List(include_finished)) {
    if (caller.MayReach(s.owner_uid())) out.push_back(std::move(s));
  }
  return out;
}

std::vector<std::string> AgentLinkServer::PushToAll(
    const std::vector<std::shared_ptr<AgentConnection>>& targets,
    const std::function<LinkStatus(AgentConnection&)>& send) {
  std::vector<std::string> failed(targets.size());
  FanOut(targets.size(), [&](size_t i) {
    LinkStatus st = send(*targets[i]);
    if (!st.ok()) failed[i] = targets[i]->agent_id() + ": " + st.message();
  });
  std::erase_if(failed, [](const std::string& f) { return f.empty(); });
  return failed;
}

absl::StatusOr<v1::ArmInfo> AgentLinkServer::Arm(const v1::ArmRequest& request,
                                                 const Caller& caller) {
  absl::StatusOr<ArmRegistry::NewArm> arm = ArmRegistry::Prepare(request, NowMs());
  if (!arm.ok()) return arm.status();
  // The arm reaches the caller's own processes (a privileged caller's:
  // everyone's), now and as they connect.
  arm->info.set_owner_uid(caller.uid);
  arm->info.set_all_users(caller.privileged);
  v1::ArmInfo info = arm->info;
  const Selector selector = arm->selector;
  std::vector<std::shared_ptr<AgentConnection>> targets;
  ArmMsg push;
  {
    // With mu_ held, an agent registering now either finds the arm in its
    // Welcome or is among the targets (RegisterAgent holds mu_ too).
    absl::MutexLock lock(&mu_);
    if (shut_down_ || !started_) return absl::UnavailableError("agent link is not serving");
    absl::StatusOr<ArmMsg> added = arms_.Add(std::move(arm).value(), caller.uid);
    if (!added.ok()) return added.status();
    push = std::move(added).value();
    for (auto& [id, c] : agents_) {
      if (ArmReaches(info, c->uid()) &&
          MatchesProcess(selector, c->hello().pid, c->hello().process_name,
                         c->hello().rank.rank)) {
        targets.push_back(c);
      }
    }
  }
  const std::vector<std::string> unreached = PushToAll(
      targets, [&](AgentConnection& c) { return c.SendWithin(options_.fanout_timeout, push); });
  // "arm.created" (with the requesting peer) is the control service's line;
  // this one says how many connected agents the arm went to.
  log::Info("arm.pushed", {{"arm", info.arm_id()},
                           {"agents", targets.size() - unreached.size()},
                           {"unreached", unreached.size()}});
  v1::Event event;
  *event.mutable_arm_changed() = info;
  event.set_owner_uid(info.owner_uid());
  events_->Publish(std::move(event));
  Wake();  // the accept loop tracks expiry deadlines
  for (const std::string& u : unreached) info.add_unreached_agents(u);
  return info;
}

std::vector<std::string> AgentLinkServer::PushDisarms(const std::vector<FinishedArm>& finished) {
  std::vector<std::string> unreached;
  if (finished.empty()) return unreached;
  auto conns = ConnectionsSnapshot();
  for (const auto& [reason, info] : finished) {
    DisarmMsg msg;
    msg.arm_id = info.arm_id();
    msg.reason = reason;
    std::vector<std::shared_ptr<AgentConnection>> reached;
    for (auto& c : conns) {
      if (ArmReaches(info, c->uid())) reached.push_back(c);
    }
    std::vector<std::string> failed = PushToAll(
        reached, [&](AgentConnection& c) { return c.SendWithin(options_.fanout_timeout, msg); });
    log::Info("arm.finished", {{"arm", info.arm_id()},
                               {"reason", std::string(WireName(reason))},
                               {"unreached", failed.size()}});
    unreached.insert(unreached.end(), failed.begin(), failed.end());
    v1::Event event;
    *event.mutable_arm_changed() = info;
    event.set_owner_uid(info.owner_uid());
    events_->Publish(std::move(event));
  }
  return unreached;
}

absl::StatusOr<std::vector<v1::ArmInfo>> AgentLinkServer::Disarm(
    const v1::DisarmRequest& request, const Caller& caller) {
  std::vector<FinishedArm> finished;
  absl::StatusOr<std::vector<v1::ArmInfo>> out = arms_.Disarm(request, caller, &finished);
  const std::vector<std::string> unreached = PushDisarms(finished);
  if (out.ok()) {
    for (v1::ArmInfo& a : *out) {
      for (const std::string& u : unreached) a.add_unreached_agents(u);
    }
  }
  return out;
}

std::vector<v1::ArmInfo> AgentLinkServer::ListArms(bool include_finished,
                                                   const Caller& caller) {
  return arms_.List(include_finished, caller);
}

void AgentLinkServer::ExpireArms() { PushDisarms(arms_.Expire(NowMs())); }

uint64_t AgentLinkServer::ChargeRing(AgentConnection* requester, uint64_t slot_size,
                                     uint32_t slot_count, bool may_reclaim, bool pinned) {
  RingBudget::Reclaim reclaim;
  if (may_reclaim) {
    reclaim = [this, requester](uint64_t shortfall) {
      return RevokeIdleRings(requester, shortfall);
    };
  }
  return ring_budget_.Charge(slot_size, slot_count, reclaim, options_.ring_reclaim_timeout,
                             pinned);
}

void AgentLinkServer::DropRingHolders() {
  const int64_t now = NowMs();
  const int64_t grace = absl::ToInt64Milliseconds(options_.ring_reclaim_timeout);
  for (auto& c : ConnectionsSnapshot()) {
    const int64_t since = c->revoke_outstanding_since_ms();
    if (since == 0 || now - since <= grace) continue;
    log::Warn("agent_link.ring_not_returned",
              {{"agent", c->agent_id()},
               {"bytes", c->ring_held()},
               {"reason", absl::StrCat("asked for its idle ring ", now - since,
                                       " ms ago and did not give it back; disconnected so "
                                       "captures get the staging")}});
    c->Kick();
  }
}

uint64_t AgentLinkServer::RevokeIdleRings(AgentConnection* requester, uint64_t bytes) {
  std::vector<std::shared_ptr<AgentConnection>> idle;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [id, c] : agents_) {
      if (c.get() != requester && c->CanBeAskedForRing()) idle.push_back(c);
    }
  }
  std::sort(idle.begin(), idle.end(), [](const auto& a, const auto& b) {
    return a->last_capture_ms() < b->last_capture_ms();
  });
  uint64_t asked = 0;
  for (auto& c : idle) {
    if (asked >= bytes) break;
    asked += c->ring_held();
    c->Revoke("another agent's capture needs staging");
    log::Info("agent_link.ring_revoked", {{"agent", c->agent_id()}, {"bytes", c->ring_held()}});
  }
  return asked;
}

bool AgentLinkServer::RegisterAgent(const std::shared_ptr<AgentConnection>& conn,
                                    std::vector<ArmMsg>* arms) {
  absl::MutexLock lock(&mu_);
  if (stopping_) return false;
  *arms = arms_.ActiveFor(conn->hello().pid, conn->hello().process_name, conn->hello().rank.rank,
                          conn->uid());
  agents_[conn->agent_id()] = conn;
  return true;
}

std::string AgentLinkServer::ReserveArm(const std::string& arm_id, const HelloMsg& hello,
                                        uint32_t uid,
                                        const CaptureBeginMsg& begin,
                                        google::protobuf::Map<std::string, std::string>* tags) {
  return arms_.Reserve(arm_id, hello, uid, begin, NowMs(), tags);
}

void AgentLinkServer::NoteSkipped(const std::string& arm_id, uint32_t uid,
                                  v1::SkippedDispatch skipped) {
  std::optional<v1::ArmInfo> changed = arms_.NoteSkipped(arm_id, uid, std::move(skipped));
  if (!changed.has_value()) return;
  v1::Event event;
  event.set_owner_uid(changed->owner_uid());
  *event.mutable_arm_changed() = std::move(*changed);
  events_->Publish(std::move(event));
}

void AgentLinkServer::ReleaseArm(const std::string& arm_id, const std::string& capture_id,
                                 bool committed, const std::string& launch_shape) {
  ArmRegistry::Released released = arms_.Release(arm_id, capture_id, committed, launch_shape);
  if (released.changed.has_value()) {
    v1::Event event;
    *event.mutable_arm_changed() = *released.changed;
    event.set_owner_uid(released.changed->owner_uid());
    events_->Publish(std::move(event));
  }
  PushDisarms(released.finished);
}

bool AgentLinkServer::ChargeDeclaredChunks(uint64_t chunks) {
  const uint64_t max = options_.capture_limits.max_inflight_chunks;
  uint64_t now = declared_chunks_in_flight_.load();
  do {
    if (chunks > max || now > max - chunks) return false;
  } while (!declared_chunks_in_flight_.compare_exchange_weak(now, now + chunks));
  return true;
}

void AgentLinkServer::UnchargeDeclaredChunks(uint64_t chunks) {
  declared_chunks_in_flight_.fetch_sub(chunks);
}

absl::StatusOr<std::unique_ptr<CaptureIngest>> AgentLinkServer::BeginIngest() {
  absl::StatusOr<std::unique_ptr<CaptureIngest>> ingest = sink_->BeginCapture();
  if (ingest.ok()) ingests_in_flight_.fetch_add(1);
  return ingest;
}

void AgentLinkServer::OnSubstitutionReport(const std::string& agent_id,
                                           const SubstitutionReportMsg& report) {
  substitutions_.OnReport(agent_id, report, NowMs());
}

}  // namespace kerncap::link
