#include "reproducer/generator/project_manifest.h"

#include <cstring>

#include "gtest/gtest.h"
#include "reproducer/replay/core/capture_source.h"

namespace kerncap::repro {
namespace {

TEST(ProjectManifestTest, PointerArgumentsResolveToRegions) {
  v1::CaptureManifest m;
  v1::Region* r = m.mutable_pre()->add_regions();
  r->set_va(0x1000);
  r->set_kind(v1::REGION_DEVICE);
  r->mutable_data()->set_size(0x100);
  v1::Region* g = m.mutable_pre()->add_regions();
  g->set_va(0x9000);
  g->set_kind(v1::REGION_MODULE_GLOBAL);
  g->set_name("table");
  g->mutable_data()->set_size(16);
  uint64_t vals[4] = {0x1010, 0x9008, 0x5000, 0};
  std::string blob(sizeof(vals) + 4, '\0');
  std::memcpy(blob.data(), vals, sizeof(vals));
  m.set_argument_blob(blob);
  for (uint32_t i = 0; i < 4; ++i) {
    v1::Argument* a = m.add_arguments();
    a->set_offset(i * 8);
    a->set_size(8);
    a->set_kind(i == 1 ? v1::ARG_BY_VALUE : v1::ARG_POINTER);
  }
  v1::Argument* n = m.add_arguments();
  n->set_offset(32);
  n->set_size(4);
  n->set_kind(v1::ARG_BY_VALUE);
  nlohmann::json a = ArgumentsJson(m);
  ASSERT_EQ(a.size(), 5u);
  EXPECT_EQ(a[0]["pointer"]["region"]["base"], "0x1000");
  EXPECT_EQ(a[0]["pointer"]["offset"], 0x10);
  EXPECT_EQ(a[0]["kind"], "pointer");
  // An 8-byte value that points into a region is reported too.
  EXPECT_EQ(a[1]["pointer"]["region"]["name"], "table");
  EXPECT_EQ(a[1]["pointer"]["region"]["kind"], replay::RegionKindName(v1::REGION_MODULE_GLOBAL));
  EXPECT_TRUE(a[2]["pointer"]["region"].is_null());
  EXPECT_EQ(a[2]["pointer"]["note"], "points outside every captured region");
  EXPECT_EQ(a[3]["pointer"]["note"], "null pointer");
  EXPECT_FALSE(a[4].contains("pointer"));
  EXPECT_EQ(a[4]["value_hex"], "00000000");
}

TEST(ProjectManifestTest, SchemaAndSections) {
  v1::CaptureManifest m;
  m.set_capture_id("cap-1");
  m.set_created_unix_ms(0);
  m.mutable_kernel()->set_mangled_name("_Z1kv");
  m.mutable_kernel()->set_demangled_name("k()");
  ProjectFacts f;
  f.capture = &m;
  f.platform = "cuda";
  f.arch = "sm_90";
  f.code.file = "code/kernel.cubin";
  SourceLocation loc;
  loc.outcome = SourceOutcome::kNoLineInfo;
  loc.message = "none";
  f.source = &loc;
  f.compile.reason = "none";
  f.files = {{"Makefile", 10, "ab", "build"}};
  nlohmann::json j = BuildProjectManifest(f);
  EXPECT_EQ(j["schema"], "kerncap.reproducer");
  EXPECT_EQ(j["schema_version"], kProjectSchemaVersion);
  EXPECT_EQ(j["kind"], "binary");
  EXPECT_EQ(j["kernel"]["demangled"], "k()");
  EXPECT_EQ(j["source"]["outcome"], "no_line_info");
  EXPECT_EQ(j["compile"]["present"], false);
  EXPECT_EQ(j["provenance"]["captured_at"], "1970-01-01T00:00:00.000Z");
  EXPECT_EQ(j["files"][0]["path"], "Makefile");
}

}  // namespace
}  // namespace kerncap::repro
