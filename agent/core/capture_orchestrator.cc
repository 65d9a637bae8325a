#include "agent/core/capture_orchestrator.h"

#include <algorithm>
#include <chrono>

#include "agent/core/log.h"

namespace kerncap::agent {
namespace {

double SecondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

Result<std::unique_ptr<PendingCapture>> CaptureOrchestrator::Before(
    std::unique_ptr<DispatchSource> source, const CaptureHeader& header,
    std::string_view arg_blob) {
  auto p = std::make_unique<PendingCapture>();
  p->header_ = header;
  p->source_ = std::move(source);

  auto t0 = std::chrono::steady_clock::now();
  Status s = p->source_->Quiesce();
  if (!s.ok()) return Error("quiesce failed: " + s.message());
  p->stats_.quiesce_seconds = SecondsSince(t0);

  auto regions = p->source_->Regions();
  if (!regions.ok()) return Error("enumerating regions failed: " + regions.error());
  p->regions_ = std::move(regions.value());
  p->regions_.erase(std::remove_if(p->regions_.begin(), p->regions_.end(),
                                   [](const RegionDesc& r) { return r.size == 0; }),
                    p->regions_.end());
  p->stats_.regions = p->regions_.size();

  auto codes = p->source_->CodeObjects();
  if (!codes.ok()) return Error("code object lookup failed: " + codes.error());

  auto session = transport_->Begin(header, arg_blob);
  if (!session.ok()) return Error("daemon refused the capture: " + session.error());
  p->session_ = std::move(session.value());

  t0 = std::chrono::steady_clock::now();
  s = SendImage(*p, ImageKind::kPre, &p->stats_.pre_bytes);
  if (s.ok()) {
    // Each distinct image once per capture, even if several modules share it.
    std::vector<const CodeObjectRef*> sent;
    for (const CodeObjectRef& code : codes.value()) {
      if (!code.bytes || code.bytes->empty()) continue;
      bool dup = std::any_of(sent.begin(), sent.end(), [&](const CodeObjectRef* o) {
        return o->key == code.key && *o->bytes == *code.bytes;
      });
      if (dup) continue;
      s = p->session_->AddCodeObject(code);
      if (!s.ok()) {
        s = Error("sending code object " + code.name + " failed: " + s.message());
        break;
      }
      sent.push_back(&code);
      ++p->stats_.code_objects;
    }
  }
  p->stats_.pre_seconds = SecondsSince(t0);
  if (!s.ok()) {
    std::string reason = "pre-dispatch snapshot failed: " + s.message();
    p->session_->Abort(reason);
    return Error(reason);
  }
  return p;
}

Result<CaptureStatsSummary> CaptureOrchestrator::After(std::unique_ptr<PendingCapture> p,
                                                       bool launch_ok) {
  if (!launch_ok) {
    p->session_->Abort("the application's launch failed");
    return Error("the launch failed; capture aborted");
  }
  Status s = p->source_->WaitForDispatch();
  if (!s.ok()) {
    std::string reason = "waiting for the dispatch failed: " + s.message();
    p->session_->Abort(reason);
    return Error(reason);
  }
  auto t0 = std::chrono::steady_clock::now();
  s = SendImage(*p, ImageKind::kPost, &p->stats_.post_bytes);
  p->stats_.post_seconds = SecondsSince(t0);
  if (!s.ok()) {
    std::string reason = "post-dispatch snapshot failed: " + s.message();
    p->session_->Abort(reason);
    return Error(reason);
  }
  s = p->session_->End(/*post_complete=*/true);
  if (!s.ok()) return Error("ending the capture failed: " + s.message());
  return p->stats_;
}

Status CaptureOrchestrator::SendImage(PendingCapture& p, ImageKind image, uint64_t* bytes) {
  for (const RegionDesc& region : p.regions_) {
    auto handle = p.session_->AddRegion(image, region);
    if (!handle.ok()) return Error("declaring region failed: " + handle.error());
    uint64_t offset = 0;
    while (offset < region.size) {
      Slot slot;
      KC_AGENT_RETURN_IF_ERROR(p.session_->AcquireSlot(&slot));
      if (slot.data == nullptr || slot.capacity == 0) return Error("transport gave an empty slot");
      p.source_->OnSlot(slot.data, slot.capacity);
      size_t n = static_cast<size_t>(std::min<uint64_t>(slot.capacity, region.size - offset));
      Status s = p.source_->ReadRegion(region, offset, slot.data, n);
      if (!s.ok()) {
        p.session_->ReturnSlot(slot);
        char where[96];
        snprintf(where, sizeof(where), "reading region 0x%llx+%llu: ",
                 static_cast<unsigned long long>(region.va),
                 static_cast<unsigned long long>(offset));
        return Error(where + s.message());
      }
      KC_AGENT_RETURN_IF_ERROR(p.session_->SubmitSlot(slot, handle.value(), offset, n));
      offset += n;
      *bytes += n;
    }
  }
  return OkStatus();
}

}  // namespace kerncap::agent
