#include "daemon/agent_link/arm_registry.h"

#include <algorithm>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "daemon/agent_link/link_ids.h"
#include "daemon/agent_link/wire_convert.h"

namespace kerncap::link {
namespace {

bool ArmFinished(const v1::ArmInfo& arm) { return arm.state() != v1::ARM_ACTIVE; }

DisarmReason DisarmReasonFor(v1::ArmState state) {
  switch (state) {
    case v1::ARM_DONE: return DisarmReason::kDone;
    case v1::ARM_EXPIRED: return DisarmReason::kExpired;
    default: return DisarmReason::kDisarmed;
  }
}

}  // namespace

ArmRegistry::ArmRegistry(size_t max_finished) : max_finished_(max_finished) {}

void ArmRegistry::set_max_finished(size_t max_finished) {
  absl::MutexLock lock(&mu_);
  max_finished_ = max_finished;
}

absl::StatusOr<ArmRegistry::NewArm> ArmRegistry::Prepare(const v1::ArmRequest& request,
                                                         int64_t now_ms) {
  int64_t expires = request.expires_unix_ms();
  if (expires == 0 && request.ttl_ms() > 0) {
    expires = now_ms + static_cast<int64_t>(std::min<uint64_t>(request.ttl_ms(), 1ull << 50));
  }
  if (request.expires_unix_ms() < 0) {
    return absl::InvalidArgumentError("expires_unix_ms must not be negative");
  }
  if (expires != 0 && expires <= now_ms) {
    return absl::InvalidArgumentError("arm would already be expired (expires_unix_ms in the past)");
  }
  NewArm arm;
  arm.selector = SelectorFromProto(request.selector(), expires);
  std::string bad = ValidateSelector(arm.selector);
  if (!bad.empty()) return absl::InvalidArgumentError(bad);
  LinkResult<NameMatcher> matcher = NameMatcher::Compile(arm.selector.kernel, arm.selector.match);
  if (!matcher.ok()) return absl::InvalidArgumentError("selector.kernel: " + matcher.error());
  arm.matcher = std::make_shared<NameMatcher>(std::move(matcher).value());
  v1::ArmInfo& info = arm.info;
  info.set_arm_id(RandomLinkId("arm-"));
  *info.mutable_selector() = request.selector();
  // The count the arm takes, stated (0 means 1, or kDefaultPerShapeCount per
  // shape), so every listing shows what it will do.
  info.mutable_selector()->set_count(EffectiveCount(arm.selector));
  arm.selector.count = EffectiveCount(arm.selector);
  info.set_state(v1::ARM_ACTIVE);
  info.set_created_unix_ms(now_ms);
  info.set_expires_unix_ms(expires);
  *info.mutable_tags() = request.tags();
  return arm;
}

void ArmRegistry::set_max_active(size_t max_active, size_t max_active_per_owner) {
  absl::MutexLock lock(&mu_);
  max_active_ = max_active;
  max_active_per_owner_ = max_active_per_owner;
}

size_t ArmRegistry::ActiveOf(uint32_t owner_uid) {
  absl::MutexLock lock(&mu_);
  auto it = active_by_owner_.find(owner_uid);
  return it == active_by_owner_.end() ? 0 : it->second;
}

absl::StatusOr<ArmMsg> ArmRegistry::Add(NewArm arm, uint32_t owner_uid) {
  ArmMsg push = ArmFromSelector(arm.info.arm_id(), arm.selector);
  Entry entry;
  entry.info = std::move(arm.info);
  entry.selector = std::move(arm.selector);
  entry.matcher = std::move(arm.matcher);
  entry.owner_uid = owner_uid;
  absl::MutexLock lock(&mu_);
  if (max_active_ > 0 && active_ >= max_active_) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "kerncapd already has ", active_, " active arms, its limit (--max-arms=", max_active_,
        "); disarm some or wait for them to finish"));
  }
  size_t& mine = active_by_owner_[owner_uid];
  if (max_active_per_owner_ > 0 && mine >= max_active_per_owner_) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "uid ", owner_uid, " already has ", mine, " active arms, the limit per user "
        "(--max-arms-per-user=", max_active_per_owner_, "); disarm some or wait for them to finish"));
  }
  ++mine;
  ++active_;
  entry.seq = next_seq_++;
  push.seq = entry.seq;
  const std::string id = entry.info.arm_id();
  arms_[id] = std::move(entry);
  return push;
}

void ArmRegistry::FinishLocked(Entry& arm, v1::ArmState state,
                               std::vector<FinishedArm>* finished) {
  arm.info.set_state(state);
  if (active_ > 0) --active_;
  auto owner = active_by_owner_.find(arm.owner_uid);
  if (owner != active_by_owner_.end() && --owner->second == 0) active_by_owner_.erase(owner);
  finished_order_.push_back(arm.info.arm_id());
  finished->push_back({DisarmReasonFor(state), arm.info});
}

void ArmRegistry::TrimFinishedLocked() {
  while (finished_order_.size() > max_finished_) {
    auto it = arms_.find(finished_order_.front());
    // An arm with captures still committing stays until they settle.
    if (it != arms_.end() && it->second.pending > 0) break;
    if (it != arms_.end()) arms_.erase(it);
    finished_order_.erase(finished_order_.begin());
  }
}

absl::StatusOr<std::vector<v1::ArmInfo>> ArmRegistry::Disarm(const v1::DisarmRequest& request,
                                                             const Caller& caller,
                                                             std::vector<FinishedArm>* finished) {
  if (request.arm_id().empty() && !request.all()) {
    return absl::InvalidArgumentError("disarm needs arm_id or all");
  }
  std::vector<v1::ArmInfo> out;
  absl::MutexLock lock(&mu_);
  if (!request.all()) {
    auto it = arms_.find(request.arm_id());
    if (it == arms_.end() || !caller.MayReach(it->second.info.owner_uid())) {
      return absl::NotFoundError(absl::StrCat("no arm ", request.arm_id()));
    }
    if (!ArmFinished(it->second.info)) FinishLocked(it->second, v1::ARM_DISARMED, finished);
    out.push_back(it->second.info);
  } else {
    for (auto& [id, arm] : arms_) {
      if (ArmFinished(arm.info) || !caller.MayReach(arm.info.owner_uid())) continue;
      FinishLocked(arm, v1::ARM_DISARMED, finished);
      out.push_back(arm.info);
    }
  }
  TrimFinishedLocked();
  return out;
}

std::vector<FinishedArm> ArmRegistry::Expire(int64_t now_ms) {
  std::vector<FinishedArm> finished;
  absl::MutexLock lock(&mu_);
  for (auto& [id, arm] : arms_) {
    if (ArmFinished(arm.info)) continue;
    if (IsExpired(arm.selector, now_ms)) FinishLocked(arm, v1::ARM_EXPIRED, &finished);
  }
  TrimFinishedLocked();
  return finished;
}

int ArmRegistry::MsUntilNextExpiry(int64_t now_ms, int cap_ms) {
  int timeout_ms = cap_ms;
  absl::MutexLock lock(&mu_);
  for (const auto& [id, arm] : arms_) {
    if (ArmFinished(arm.info) || arm.info.expires_unix_ms() == 0) continue;
    int64_t left = std::max<int64_t>(0, arm.info.expires_unix_ms() - now_ms);
    timeout_ms = static_cast<int>(std::min<int64_t>(timeout_ms, left + 1));
  }
  return timeout_ms;
}

std::vector<v1::ArmInfo> ArmRegistry::List(bool include_finished, const Caller& caller) {
  absl::MutexLock lock(&mu_);
  std::vector<const Entry*> entries;
  for (const auto& [id, arm] : arms_) {
    if (!caller.MayReach(arm.info.owner_uid())) continue;
    if (include_finished || !ArmFinished(arm.info)) entries.push_back(&arm);
  }
  std::sort(entries.begin(), entries.end(),
            [](const Entry* a, const Entry* b) { return a->seq < b->seq; });
  std::vector<v1::ArmInfo> out;
  out.reserve(entries.size());
  for (const Entry* e : entries) out.push_back(e->info);
  return out;
}

std::vector<ArmMsg> ArmRegistry::ActiveFor(uint32_t pid, const std::string& process_name,
                                           int64_t rank, uint32_t uid) {
  std::vector<ArmMsg> out;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [id, arm] : arms_) {
      if (ArmFinished(arm.info) || !ArmReaches(arm.info, uid)) continue;
      if (!MatchesProcess(arm.selector, pid, process_name, rank)) continue;
      out.push_back(ArmFromSelector(id, arm.selector));
      out.back().seq = arm.seq;
    }
  }
  // arms_ is keyed by (random) id: put them back in arming order.
  std::sort(out.begin(), out.end(), [](const ArmMsg& a, const ArmMsg& b) { return a.seq < b.seq; });
  return out;
}

std::string ArmRegistry::Reserve(const std::string& arm_id, const HelloMsg& hello, uint32_t uid,
                                 const CaptureBeginMsg& begin, int64_t now_ms,
                                 google::protobuf::Map<std::string, std::string>* tags) {
  absl::MutexLock lock(&mu_);
  auto it = arms_.find(arm_id);
  // Another user's arm is as unknown to this agent as a made-up id.
  if (it == arms_.end() || !ArmReaches(it->second.info, uid)) return "unknown arm " + arm_id;
  Entry& arm = it->second;
  if (ArmFinished(arm.info) || IsExpired(arm.selector, now_ms)) {
    return "arm " + arm_id + " is no longer active";
  }
  if (!MatchesProcess(arm.selector, hello.pid, hello.process_name, hello.rank.rank)) {
    return "arm " + arm_id + " does not apply to this process";
  }
  if (!MatchesDevice(arm.selector, static_cast<int32_t>(begin.device))) {
    return absl::StrCat("arm ", arm_id, " does not select device ", begin.device);
  }
  if (arm.matcher == nullptr || !arm.matcher->Matches(begin.demangled_name, begin.mangled_name)) {
    return absl::StrCat("arm ", arm_id, " does not select kernel ",
                        begin.demangled_name.empty() ? begin.mangled_name : begin.demangled_name);
  }
  if (arm.info.captured() + arm.pending >= EffectiveCount(arm.selector)) {
    return "arm " + arm_id + " already has its captures";
  }
  if (arm.selector.per_shape != PerShape::kOff) {
    if (!IsLaunchShapeKey(begin.launch_shape)) {
      return "arm " + arm_id +
             " captures one dispatch per launch shape, and the agent named no shape for this "
             "one (an agent older than per-shape arms?)";
    }
    if (!arm.shapes.insert(begin.launch_shape).second) {
      return "arm " + arm_id + " already has a capture of launch shape " + begin.launch_shape +
             " (from another process)";
    }
  }
  ++arm.pending;
  if (tags != nullptr) *tags = arm.info.tags();
  return "";
}

ArmRegistry::Released ArmRegistry::Release(const std::string& arm_id,
                                           const std::string& capture_id, bool committed,
                                           const std::string& launch_shape) {
  Released out;
  absl::MutexLock lock(&mu_);
  auto it = arms_.find(arm_id);
  if (it == arms_.end()) return out;
  Entry& arm = it->second;
  if (arm.pending > 0) --arm.pending;
  if (!committed) {
    if (arm.selector.per_shape != PerShape::kOff) arm.shapes.erase(launch_shape);
    return out;
  }
  arm.info.set_captured(arm.info.captured() + 1);
  arm.info.add_capture_ids(capture_id);
  if (!ArmFinished(arm.info) && arm.info.captured() >= EffectiveCount(arm.selector)) {
    FinishLocked(arm, v1::ARM_DONE, &out.finished);
    TrimFinishedLocked();
  } else {
    out.changed = arm.info;
  }
  return out;
}

std::optional<v1::ArmInfo> ArmRegistry::NoteSkipped(const std::string& arm_id, uint32_t uid,
                                                    v1::SkippedDispatch skipped) {
  absl::MutexLock lock(&mu_);
  auto it = arms_.find(arm_id);
  if (it == arms_.end() || !ArmReaches(it->second.info, uid)) return std::nullopt;
  v1::ArmInfo& info = it->second.info;
  // Bounded whatever an agent sends: the oldest entries go.
  if (info.skipped_size() >= kMaxSkipsKept) {
    info.mutable_skipped()->DeleteSubrange(0, info.skipped_size() - kMaxSkipsKept + 1);
  }
  *info.add_skipped() = std::move(skipped);
  info.set_skipped_count(info.skipped_count() + 1);
  return info;
}

}  // namespace kerncap::link
