#include "agent/core/capture_orchestrator.h"

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "agent/testing/fake_transport.h"
#include "gtest/gtest.h"

namespace kerncap::agent {
namespace {

// "Device memory" is a set of host buffers at fake VAs.
struct FakeDevice {
  std::vector<RegionDesc> regions;
  std::vector<std::string> memory;  // parallel to regions
  int quiesce_calls = 0;
  int wait_calls = 0;
  bool fail_read_post = false;
  bool in_post = false;

  void Add(uint64_t va, std::string bytes, RegionKind kind = RegionKind::kDevice,
           std::string name = "") {
    regions.push_back(RegionDesc{va, bytes.size(), kind, 0, std::move(name)});
    memory.push_back(std::move(bytes));
  }
};

class FakeSource : public DispatchSource {
 public:
  FakeSource(FakeDevice* dev, std::vector<CodeObjectRef> codes) : dev_(dev), codes_(codes) {}
  Status Quiesce() override {
    ++dev_->quiesce_calls;
    return OkStatus();
  }
  Result<std::vector<RegionDesc>> Regions() override { return dev_->regions; }
  Result<std::vector<CodeObjectRef>> CodeObjects() override { return codes_; }
  Status ReadRegion(const RegionDesc& region, uint64_t offset, void* dst, size_t size) override {
    if (dev_->in_post && dev_->fail_read_post) return Error("injected read failure");
    for (size_t i = 0; i < dev_->regions.size(); ++i) {
      if (dev_->regions[i].va == region.va) {
        if (offset + size > dev_->memory[i].size()) return Error("read out of range");
        std::memcpy(dst, dev_->memory[i].data() + offset, size);
        return OkStatus();
      }
    }
    return Error("unknown region");
  }
  Status WaitForDispatch() override {
    ++dev_->wait_calls;
    dev_->in_post = true;
    return OkStatus();
  }

 private:
  FakeDevice* dev_;
  std::vector<CodeObjectRef> codes_;
};

CodeObjectRef Code(std::string name, std::string bytes) {
  CodeObjectRef c;
  c.name = std::move(name);
  c.bytes = std::make_shared<const std::string>(bytes);
  c.key = CodeObjectKey(bytes);
  return c;
}

CaptureHeader Header() {
  CaptureHeader h;
  h.arm_id = "arm-1";
  h.dispatch_index = 5;
  h.kernel.mangled_name = "_Z5scalePfi";
  h.kernel.demangled_name = "scale(float*, int)";
  h.launch.grid = {4, 1, 1};
  h.launch.block = {256, 1, 1};
  return h;
}

std::string Pattern(size_t n, char seed) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>(seed + i * 7);
  return s;
}

TEST(CaptureOrchestratorTest, PreAndPostImagesCodeObjectOnce) {
  FakeTransport transport(/*slot_size=*/4096, /*slot_count=*/2);
  FakeDevice dev;
  dev.Add(0x7f0000000000, Pattern(10000, 1));  // spans 3 slots
  dev.Add(0x7f0000100000, Pattern(100, 2));
  dev.Add(0x5000, Pattern(16, 3), RegionKind::kConstant, "coeffs");
  // The same image twice (two modules sharing a cubin) plus a distinct one.
  auto c1 = Code("mod-1", "ELF-one");
  std::vector<CodeObjectRef> codes = {c1, Code("mod-1-again", "ELF-one"), Code("mod-2", "ELF-2")};
  CaptureOrchestrator orch(&transport);

  std::string blob = "\x01\x02\x03\x04";
  auto pending = orch.Before(std::make_unique<FakeSource>(&dev, codes), Header(), blob);
  ASSERT_TRUE(pending.ok()) << pending.error();
  EXPECT_EQ(dev.quiesce_calls, 1);
  EXPECT_TRUE(transport.committed().empty());  // not shipped before the dispatch ran

  // The "kernel" scales the first buffer in place.
  for (char& c : dev.memory[0]) c = static_cast<char>(c * 2);
  auto stats = orch.After(std::move(pending.value()), /*launch_ok=*/true);
  ASSERT_TRUE(stats.ok()) << stats.error();
  EXPECT_EQ(dev.wait_calls, 1);
  EXPECT_EQ(stats->regions, 3u);
  EXPECT_EQ(stats->pre_bytes, 10116u);
  EXPECT_EQ(stats->post_bytes, 10116u);
  EXPECT_EQ(stats->code_objects, 2u);

  ASSERT_EQ(transport.committed().size(), 1u);
  const FakeCapture& cap = transport.committed()[0];
  EXPECT_TRUE(cap.post_complete);
  EXPECT_EQ(cap.arg_blob, blob);
  EXPECT_EQ(cap.header.dispatch_index, 5u);
  ASSERT_EQ(cap.pre.size(), 3u);
  ASSERT_EQ(cap.post.size(), 3u);
  EXPECT_EQ(cap.pre[0].bytes, Pattern(10000, 1));  // input: before the kernel
  EXPECT_EQ(cap.post[0].bytes, dev.memory[0]);     // golden output: after it
  EXPECT_NE(cap.pre[0].bytes, cap.post[0].bytes);
  EXPECT_EQ(cap.pre[1].bytes, cap.post[1].bytes);
  EXPECT_EQ(cap.pre[2].desc.kind, RegionKind::kConstant);
  EXPECT_EQ(cap.pre[2].desc.name, "coeffs");
  ASSERT_EQ(cap.code_objects.size(), 2u);
  EXPECT_EQ(cap.code_objects[0].name, "mod-1");
  EXPECT_EQ(cap.code_objects[1].name, "mod-2");
  EXPECT_EQ(transport.free_slots(), 2);
}

TEST(CaptureOrchestratorTest, ZeroSizedRegionsAreDropped) {
  FakeTransport transport;
  FakeDevice dev;
  dev.Add(0x1000, "");
  dev.Add(0x2000, "abc");
  CaptureOrchestrator orch(&transport);
  auto pending = orch.Before(std::make_unique<FakeSource>(&dev, std::vector<CodeObjectRef>{}),
                             Header(), "");
  ASSERT_TRUE(pending.ok());
  ASSERT_TRUE(orch.After(std::move(pending.value()), true).ok());
  ASSERT_EQ(transport.committed().size(), 1u);
  ASSERT_EQ(transport.committed()[0].pre.size(), 1u);
  EXPECT_EQ(transport.committed()[0].pre[0].desc.va, 0x2000u);
}

TEST(CaptureOrchestratorTest, FailureInPreSnapshotAbortsWithNoPartialState) {
  FakeTransport transport(4096, 2);
  FakeDevice dev;
  dev.Add(0x1000, Pattern(20000, 1));
  transport.FailSubmitAt(3);  // in the middle of the first region
  CaptureOrchestrator orch(&transport);
  auto pending = orch.Before(std::make_unique<FakeSource>(&dev, std::vector<CodeObjectRef>{}),
                             Header(), "");
  ASSERT_FALSE(pending.ok());
  EXPECT_NE(pending.error().find("injected SubmitSlot failure"), std::string::npos);
  EXPECT_TRUE(transport.committed().empty());
  ASSERT_EQ(transport.aborted().size(), 1u);
  EXPECT_NE(transport.aborted()[0].abort_reason.find("pre-dispatch"), std::string::npos);
  EXPECT_EQ(transport.free_slots(), 2);  // slots returned
}

TEST(CaptureOrchestratorTest, FailureInPostSnapshotAborts) {
  FakeTransport transport;
  FakeDevice dev;
  dev.Add(0x1000, Pattern(5000, 1));
  dev.fail_read_post = true;
  CaptureOrchestrator orch(&transport);
  auto pending = orch.Before(std::make_unique<FakeSource>(&dev, std::vector<CodeObjectRef>{}),
                             Header(), "");
  ASSERT_TRUE(pending.ok());
  auto stats = orch.After(std::move(pending.value()), true);
  ASSERT_FALSE(stats.ok());
  EXPECT_NE(stats.error().find("injected read failure"), std::string::npos);
  EXPECT_TRUE(transport.committed().empty());
  ASSERT_EQ(transport.aborted().size(), 1u);
}

TEST(CaptureOrchestratorTest, CodeObjectFailureAborts) {
  FakeTransport transport;
  FakeDevice dev;
  dev.Add(0x1000, "abc");
  transport.FailCodeObject(true);
  CaptureOrchestrator orch(&transport);
  auto pending = orch.Before(
      std::make_unique<FakeSource>(&dev, std::vector<CodeObjectRef>{Code("m", "ELF")}), Header(),
      "");
  ASSERT_FALSE(pending.ok());
  EXPECT_TRUE(transport.committed().empty());
  EXPECT_EQ(transport.aborted().size(), 1u);
}

TEST(CaptureOrchestratorTest, FailedLaunchAborts) {
  FakeTransport transport;
  FakeDevice dev;
  dev.Add(0x1000, "abc");
  CaptureOrchestrator orch(&transport);
  auto pending = orch.Before(std::make_unique<FakeSource>(&dev, std::vector<CodeObjectRef>{}),
                             Header(), "");
  ASSERT_TRUE(pending.ok());
  EXPECT_FALSE(orch.After(std::move(pending.value()), /*launch_ok=*/false).ok());
  EXPECT_EQ(dev.wait_calls, 0);  // never waits on a dispatch that was not queued
  EXPECT_TRUE(transport.committed().empty());
  EXPECT_EQ(transport.aborted().size(), 1u);
}

TEST(CaptureOrchestratorTest, RefusedBeginLeavesNothing) {
  FakeTransport transport;
  FakeDevice dev;
  dev.Add(0x1000, "abc");
  transport.RefuseBegin(true);
  CaptureOrchestrator orch(&transport);
  auto pending = orch.Before(std::make_unique<FakeSource>(&dev, std::vector<CodeObjectRef>{}),
                             Header(), "");
  ASSERT_FALSE(pending.ok());
  EXPECT_TRUE(transport.committed().empty());
  EXPECT_TRUE(transport.aborted().empty());
}

}  // namespace
}  // namespace kerncap::agent
