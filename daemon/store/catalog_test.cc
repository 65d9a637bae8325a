#include "daemon/store/catalog.h"

#include <fstream>

#include "daemon/store/store_test_util.h"
#include "gtest/gtest.h"

namespace kerncap::store {
namespace {

v1::CaptureManifest Make(const std::string& id, const std::string& kernel, uint32_t pid,
                         int64_t created, std::map<std::string, std::string> tags = {}) {
  v1::CaptureManifest m;
  m.set_capture_id(id);
  m.set_created_unix_ms(created);
  m.mutable_kernel()->set_demangled_name(kernel);
  m.mutable_kernel()->set_mangled_name("_Z" + kernel);
  m.mutable_process()->set_pid(pid);
  m.mutable_process()->set_hostname("node1");
  m.mutable_stats()->set_logical_bytes(1000);
  for (auto& [k, v] : tags) (*m.mutable_tags())[k] = v;
  return m;
}

std::vector<std::string> Ids(const std::vector<v1::CaptureSummary>& list) {
  std::vector<std::string> out;
  for (const auto& s : list) out.push_back(s.capture_id());
  return out;
}

TEST(CatalogTest, ListFiltersByKernelPidTagAndLimit) {
  testing::TempDir dir;
  auto cat = Catalog::Open(dir.Sub("c.sqlite"));
  ASSERT_TRUE(cat.ok()) << cat.status();
  ASSERT_TRUE(
      (*cat)->Upsert(Make("cap-000000000001", "matmul_f16", 10, 1, {{"run", "a"}}), "d1").ok());
  ASSERT_TRUE(
      (*cat)->Upsert(Make("cap-000000000002", "softmax", 10, 2, {{"run", "b"}}), "d2").ok());
  ASSERT_TRUE((*cat)->Upsert(Make("cap-000000000003", "matmul_bf16", 20, 3), "d3").ok());

  v1::ListCapturesRequest f;
  EXPECT_EQ(Ids(*(*cat)->List(f)),
            (std::vector<std::string>{"cap-000000000003", "cap-000000000002", "cap-000000000001"}));
  f.set_kernel_contains("matmul");
  EXPECT_EQ(Ids(*(*cat)->List(f)),
            (std::vector<std::string>{"cap-000000000003", "cap-000000000001"}));
  f.set_pid(10);
  EXPECT_EQ(Ids(*(*cat)->List(f)), (std::vector<std::string>{"cap-000000000001"}));
  f.Clear();
  f.set_tag("run=b");
  EXPECT_EQ(Ids(*(*cat)->List(f)), (std::vector<std::string>{"cap-000000000002"}));
  f.set_tag("run");
  EXPECT_EQ((*cat)->List(f)->size(), 2u);
  f.Clear();
  f.set_limit(1);
  EXPECT_EQ(Ids(*(*cat)->List(f)), (std::vector<std::string>{"cap-000000000003"}));
  EXPECT_EQ(*(*cat)->TotalLogicalBytes(), 3000u);

  ASSERT_TRUE((*cat)->Delete("cap-000000000003").ok());
  f.Clear();
  f.set_kernel_contains("bf16");
  EXPECT_TRUE((*cat)->List(f)->empty());
  EXPECT_EQ((*cat)->Ids()->size(), 2u);
}

TEST(CatalogTest, GarbageFileIsDataLoss) {
  testing::TempDir dir;
  {
    std::ofstream f(dir.Sub("c.sqlite"));
    f << std::string(8192, 'Z');
  }
  auto cat = Catalog::Open(dir.Sub("c.sqlite"));
  EXPECT_EQ(cat.status().code(), absl::StatusCode::kDataLoss);
}

v1::CaptureManifest OneRegionManifest() {
  v1::CaptureManifest m;
  m.mutable_pre()->add_regions()->set_va(0x1000);
  return m;
}

TEST(CatalogTest, SummaryPrefersDemangledName) {
  v1::CaptureManifest m = OneRegionManifest();
  m.mutable_kernel()->set_mangled_name("_Z3addPf");
  EXPECT_EQ(Catalog::Summarize(m).kernel(), "_Z3addPf");
  m.mutable_kernel()->set_demangled_name("add(float*)");
  m.mutable_process()->set_pid(42);
  (*m.mutable_tags())["run"] = "a";
  v1::CaptureSummary s = Catalog::Summarize(m);
  EXPECT_EQ(s.kernel(), "add(float*)");
  EXPECT_EQ(s.mangled_name(), "_Z3addPf");
  EXPECT_EQ(s.pid(), 42u);
  EXPECT_EQ(s.regions(), 1u);
  EXPECT_EQ(s.tags().at("run"), "a");
}

}  // namespace
}  // namespace kerncap::store
