// arm_registry.h: kerncapd's arms (what `kerncapctl arm` asked to capture)
// and their bookkeeping: state (ACTIVE until DONE, EXPIRED or DISARMED),
// selector and compiled kernel matcher, arming order, captures pending and
// captured, skipped-dispatch reports, expiry, and how many finished arms are
// kept for ListArms(true).
//
// It knows nothing of sockets or agents' connections: a call that finishes
// arms returns them (FinishedArm) and the caller pushes the Disarm to agents
// and publishes arm_changed. Times are passed in (unix ms), so callers decide
// what "now" is and tests need no clock.
//
// Thread-safety: all methods are thread-safe. Its lock is a leaf: nothing is
// called while it is held, so callers may hold their own locks around calls
// (AgentLinkServer does, to snapshot arms and agents together).
#ifndef KERNCAP_DAEMON_AGENT_LINK_ARM_REGISTRY_H_
#define KERNCAP_DAEMON_AGENT_LINK_ARM_REGISTRY_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/agent_link/messages.h"
#include "common/agent_link/selector.h"
#include "daemon/caller.h"
#include "kerncap/v1/control.pb.h"

namespace kerncap::link {

// An arm that a call finished: `reason` is the Disarm push's ("done",
// "expired" or "disarmed"), `info` the arm as it is now.
struct FinishedArm {
  DisarmReason reason = DisarmReason::kDone;
  v1::ArmInfo info;
};

// Whether `arm` may take dispatches of a process of user `process_uid`: its
// owner's processes, or every process for an arm a privileged caller made.
inline bool ArmReaches(const v1::ArmInfo& arm, uint32_t process_uid) {
  return arm.all_users() || arm.owner_uid() == process_uid;
}

class ArmRegistry {
 public:
  // A validated arm request, not yet recorded (Prepare, then Add).
  struct NewArm {
    v1::ArmInfo info;  // ACTIVE, with its id, times and tags
    Selector selector;
    std::shared_ptr<NameMatcher> matcher;
  };

  // Bounds on active arms: every active arm costs each agent it applies to
  // a match on the launching thread of every new kernel (and the daemon a
  // push to every agent), so neither the node nor one peer may pile them up.
  static constexpr size_t kDefaultMaxActiveArms = 1024;
  static constexpr size_t kDefaultMaxActiveArmsPerOwner = 64;

  // Finished arms beyond `max_finished` are forgotten, oldest first.
  explicit ArmRegistry(size_t max_finished = 1000);
  ArmRegistry(const ArmRegistry&) = delete;
  ArmRegistry& operator=(const ArmRegistry&) = delete;

  void set_max_finished(size_t max_finished) ABSL_LOCKS_EXCLUDED(mu_);
  // Active arms in all and per owner uid (0: no bound).
  void set_max_active(size_t max_active, size_t max_active_per_owner) ABSL_LOCKS_EXCLUDED(mu_);

  // Validates `request` at `now_ms` (expiry not in the past, the selector,
  // its kernel pattern) and gives the arm a new id; InvalidArgument naming
  // the bad field. Records nothing.
  static absl::StatusOr<NewArm> Prepare(const v1::ArmRequest& request, int64_t now_ms);
  // Records `arm` as the newest arm, owned by `owner_uid` (the requesting
  // caller's uid); the Arm message that pushes it to agents (with its arming
  // order in `seq`). ResourceExhausted naming the bound (and how to get
  // below it) when the daemon or that owner already has its most active
  // arms; nothing is recorded then.
  absl::StatusOr<ArmMsg> Add(NewArm arm, uint32_t owner_uid) ABSL_LOCKS_EXCLUDED(mu_);
  // Active arms of `owner_uid`.
  size_t ActiveOf(uint32_t owner_uid) ABSL_LOCKS_EXCLUDED(mu_);

  // Disarms request.arm_id (NotFound when unknown or not the caller's to
  // reach; an arm already finished is returned as it is) or, with
  // request.all, every active arm the caller may reach; InvalidArgument with
  // neither. The arms named, as they are now; those it finished are appended
  // to `finished`.
  absl::StatusOr<std::vector<v1::ArmInfo>> Disarm(const v1::DisarmRequest& request,
                                                  const Caller& caller,
                                                  std::vector<FinishedArm>* finished)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Expires the active arms whose deadline is at or before `now_ms`.
  std::vector<FinishedArm> Expire(int64_t now_ms) ABSL_LOCKS_EXCLUDED(mu_);
  // Milliseconds from `now_ms` until just after the next deadline of an
  // active arm, at most `cap_ms`.
  int MsUntilNextExpiry(int64_t now_ms, int cap_ms) ABSL_LOCKS_EXCLUDED(mu_);

  // Arms the caller may reach (all, or only active ones) in arming order.
  std::vector<v1::ArmInfo> List(bool include_finished, const Caller& caller)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Arm messages of the active arms that apply to the process (pid,
  // process_name, launcher rank; -1: none known; its user, ArmReaches), in
  // arming order: what a new agent's Welcome carries.
  std::vector<ArmMsg> ActiveFor(uint32_t pid, const std::string& process_name, int64_t rank,
                                uint32_t uid)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Reserves one capture of `arm_id` for a dispatch of `begin`'s kernel on
  // `begin.device` in the process `hello` describes (of user `uid`), at
  // `now_ms`. Empty on
  // success, the arm's tags then copied into `tags` (when not null);
  // otherwise why not: the arm is unknown or not active, does not apply to
  // that dispatch, or has its captures (committed plus reserved); of a
  // per-shape arm also when begin.launch_shape is not a shape key or is one
  // the arm already has (committed or reserved, from any process).
  std::string Reserve(const std::string& arm_id, const HelloMsg& hello, uint32_t uid,
                      const CaptureBeginMsg& begin, int64_t now_ms,
                      google::protobuf::Map<std::string, std::string>* tags)
      ABSL_LOCKS_EXCLUDED(mu_);

  // What Release changed: `changed` when the arm took a capture and stays
  // active (publish arm_changed), `finished` when it took its last one.
  struct Released {
    std::optional<v1::ArmInfo> changed;
    std::vector<FinishedArm> finished;
  };
  // Ends a reservation: committed, the arm counts `capture_id` as captured
  // (and is DONE with its count); otherwise only the reservation goes (and,
  // of a per-shape arm, the reserved `launch_shape`, so another dispatch of
  // that shape can be taken). Unknown arms are ignored.
  Released Release(const std::string& arm_id, const std::string& capture_id, bool committed,
                   const std::string& launch_shape = "") ABSL_LOCKS_EXCLUDED(mu_);

  // Records a dispatch the arm selected that its agent did not capture
  // (ArmInfo.skipped keeps the newest kMaxSkipsKept; skipped_count counts
  // all). The arm as it is now; nullopt for unknown arms and arms that do
  // not reach processes of `uid` (another user's agent cannot fill them).
  static constexpr int kMaxSkipsKept = 16;
  std::optional<v1::ArmInfo> NoteSkipped(const std::string& arm_id, uint32_t uid,
                                         v1::SkippedDispatch skipped)
      ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Entry {
    v1::ArmInfo info;
    Selector selector;
    // The arm's kernel matcher, to check that a capture an agent says this
    // arm selected is one it can have selected.
    std::shared_ptr<NameMatcher> matcher;
    uint64_t seq = 0;      // arming order: competing arms are served oldest first
    uint32_t owner_uid = 0;  // who armed it (the per-owner bound)
    uint32_t pending = 0;  // captures begun but not yet committed/failed
    // Per-shape arms: the launch shapes of the captures reserved and taken
    // (at most EffectiveCount(selector) of them).
    std::set<std::string> shapes;
  };

  void FinishLocked(Entry& arm, v1::ArmState state, std::vector<FinishedArm>* finished)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void TrimFinishedLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  absl::Mutex mu_;
  size_t max_finished_ ABSL_GUARDED_BY(mu_);
  size_t max_active_ ABSL_GUARDED_BY(mu_) = kDefaultMaxActiveArms;
  size_t max_active_per_owner_ ABSL_GUARDED_BY(mu_) = kDefaultMaxActiveArmsPerOwner;
  size_t active_ ABSL_GUARDED_BY(mu_) = 0;  // arms ACTIVE now
  std::map<uint32_t, size_t> active_by_owner_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, Entry> arms_ ABSL_GUARDED_BY(mu_);  // by (random) id
  uint64_t next_seq_ ABSL_GUARDED_BY(mu_) = 1;
  std::vector<std::string> finished_order_ ABSL_GUARDED_BY(mu_);  // oldest first
};

}  // namespace kerncap::link

#endif  // KERNCAP_DAEMON_AGENT_LINK_ARM_REGISTRY_H_
