#include "daemon/import/reference_capture.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <future>
#include <fstream>

#include "absl/strings/escaping.h"
#include "absl/strings/str_format.h"
#include "common/digest.h"
#include "daemon/store/store.h"
#include "daemon/store/store_test_util.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace kerncap::import {
namespace {

using nlohmann::json;
using store::testing::RandomBytes;
using store::testing::SmallOptions;
using store::testing::TempDir;
using store::testing::TextBytes;

void Write(const std::string& path, const std::string& bytes) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream f(path, std::ios::binary);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// A synthetic folder in the reference tool's layout.
struct RefFolder {
  std::string dir;
  std::string region_a, region_b, kernarg, hsaco, modvar;
  json metadata, dispatch, regions;

  explicit RefFolder(const std::string& root) : dir(root + "/capture") {
    region_a = TextBytes((5 << 20) + 4096, 1);  // > one 4 MiB piece, odd tail
    region_b = std::string(256 << 10, '\0') + RandomBytes(64 << 10, 2);
    kernarg = RandomBytes(280, 3);
    hsaco = TextBytes(50000, 4);
    modvar = RandomBytes(1024, 5);
    metadata = {
        {"kernel_name", "vector_add(float const*, float*, int) [clone .kd]"},
        {"kernel_symbol", "_Z10vector_addPKfPfi"},
        {"gpu_arch", "gfx90a"},
        {"grid", {{"x", 1048576}, {"y", 1}, {"z", 1}}},
        {"block", {{"x", 256}, {"y", 1}, {"z", 1}}},
        {"lds_size", 0},
        {"kernarg_slots",
         {{{"offset", 0},
           {"size", 8},
           {"value_kind", "global_buffer"},
           {"value_type", "float*"},
           {"name", "a"}},
          {{"offset", 8}, {"size", 8}, {"value_kind", "global_buffer"}, {"name", "out"}},
          {{"offset", 16}, {"size", 4}, {"value_kind", "by_value"}, {"name", "n"}},
          {{"offset", 24}, {"size", 8}, {"value_kind", "hidden_global_offset_x"}}}},
        {"sgpr_count", 24},
        {"vgpr_count", 12},
        {"hsaco_sha256", Sha256(hsaco).ToHex()},
    };
    dispatch = {{"agent_name", "gfx90a"},     {"isa_name", "amdgcn-amd-amdhsa--gfx90a"},
                {"wavefront_size", 64},       {"grid", {1048576, 1, 1}},
                {"block", {256, 1, 1}},       {"group_segment_size", 0},
                {"private_segment_size", 16}, {"kernarg_size", 280},
                {"dispatch_index", 7}};
    regions = {{"regions",
                {{{"base", "0x7f0000000000"},
                  {"size", region_a.size()},
                  {"is_pool", true},
                  {"is_vmem", false},
                  {"contains_kernarg", false}},
                 {{"base", 139706696204288ull},
                  {"size", region_b.size()},
                  {"is_pool", true},
                  {"is_vmem", true},
                  {"contains_kernarg", true}}}}};
  }

  void WriteAll() {
    Write(dir + "/metadata.json", metadata.dump());
    Write(dir + "/dispatch.json", dispatch.dump());
    Write(dir + "/memory_regions.json", regions.dump());
    Write(dir + "/memory/region_7f0000000000.bin", region_a);
    Write(dir + absl::StrFormat("/memory/region_%x.bin", 139706696204288ull), region_b);
    Write(dir + "/kernarg_raw.bin", kernarg);
    Write(dir + "/kernarg.bin", kernarg);
    Write(dir + "/kernel.hsaco", hsaco);
    Write(dir + "/module_variables/abcd_c_weights.bin", modvar);
    Write(dir + "/module_variables.json", json({{"variables",
                                                 {{{"executable_sha256", "abcd"},
                                                   {"name", "c_weights"},
                                                   {"size", modvar.size()},
                                                   {"blob", "module_variables/abcd_c_weights.bin"}},
                                                  {{"executable_sha256", "abcd"},
                                                   {"name", "inline_b64"},
                                                   {"size", 3},
                                                   {"blob", absl::Base64Escape("xyz")}}}}})
                                              .dump());
    Write(dir + "/capture_complete", "ok\n");
  }
};

class ReferenceImportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto s = store::Store::Open(SmallOptions(store_dir_.path()));
    ASSERT_TRUE(s.ok()) << s.status();
    store_ = std::move(*s);
  }
  std::string Read(const v1::Region& r) {
    std::string out(r.data().size(), '\0');
    absl::Status st = store_->ReadChunkList(r.data(), out.data(), out.size());
    EXPECT_TRUE(st.ok()) << st;
    return out;
  }
  TempDir store_dir_, folder_root_;
  std::unique_ptr<store::Store> store_;
};

TEST_F(ReferenceImportTest, ImportsFullFolder) {
  RefFolder ref(folder_root_.path());
  ref.WriteAll();
  auto id = ImportReferenceCapture(ref.dir, *store_);
  ASSERT_TRUE(id.ok()) << id.status();
  auto m = store_->GetManifest(*id);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->source(), v1::SOURCE_REFERENCE_IMPORT);
  EXPECT_FALSE(m->post_complete());
  EXPECT_EQ(m->tags().at("kerncap.reference_post_state"), "true");
  EXPECT_EQ(m->kernel().platform(), v1::PLATFORM_HSA);
  EXPECT_EQ(m->kernel().demangled_name(), "vector_add(float const*, float*, int)");
  EXPECT_EQ(m->kernel().mangled_name(), "_Z10vector_addPKfPfi");
  EXPECT_EQ(m->kernel().arch(), "gfx90a");
  EXPECT_EQ(m->launch().grid(0), 1048576u);
  EXPECT_EQ(m->launch().block(0), 256u);
  EXPECT_EQ(m->launch().private_mem_bytes(), 16u);
  EXPECT_EQ(m->launch().attributes().at("vgpr_count"), 12);
  EXPECT_EQ(m->dispatch_index(), 7u);
  EXPECT_EQ(m->argument_blob(), ref.kernarg);
  ASSERT_EQ(m->arguments_size(), 4);
  EXPECT_EQ(m->arguments(0).kind(), v1::ARG_POINTER);
  EXPECT_EQ(m->arguments(0).type_name(), "float*");
  EXPECT_EQ(m->arguments(2).kind(), v1::ARG_BY_VALUE);
  EXPECT_EQ(m->arguments(3).kind(), v1::ARG_HIDDEN);
  EXPECT_EQ(m->arguments(3).value_kind(), "hidden_global_offset_x");

  ASSERT_EQ(m->code_objects_size(), 1);
  EXPECT_EQ(m->code_objects(0).format(), v1::CODE_OBJECT_HSACO);
  EXPECT_EQ(m->kernel().code_object_digest(), Sha256(ref.hsaco).ToBytes());
  std::string code(ref.hsaco.size(), '\0');
  ASSERT_TRUE(store_->ReadChunkList(m->code_objects(0).data(), code.data(), code.size()).ok());
  EXPECT_EQ(code, ref.hsaco);

  ASSERT_EQ(m->pre().regions_size(), 4);
  EXPECT_EQ(m->pre().regions(0).va(), 0x7f0000000000u);
  EXPECT_EQ(m->pre().regions(0).kind(), v1::REGION_DEVICE);
  EXPECT_EQ(Read(m->pre().regions(0)), ref.region_a);
  EXPECT_EQ(m->pre().regions(1).kind(), v1::REGION_KERNARG);
  EXPECT_EQ(Read(m->pre().regions(1)), ref.region_b);
  EXPECT_EQ(m->pre().regions(2).kind(), v1::REGION_MODULE_GLOBAL);
  EXPECT_EQ(m->pre().regions(2).name(), "c_weights");
  EXPECT_EQ(Read(m->pre().regions(2)), ref.modvar);
  EXPECT_EQ(Read(m->pre().regions(3)), "xyz");
  EXPECT_EQ(m->post().regions_size(), 0);
  EXPECT_GT(m->stats().zero_bytes(), 0u);

  v1::ListCapturesRequest f;
  f.set_tag("kerncap.reference_post_state=true");
  EXPECT_EQ(store_->ListCaptures(f)->size(), 1u);
}

TEST_F(ReferenceImportTest, RegionWithoutBinIsAnErrorNamingIt) {
  RefFolder ref(folder_root_.path());
  ref.WriteAll();
  std::filesystem::remove(ref.dir + "/memory/region_7f0000000000.bin");
  auto id = ImportReferenceCapture(ref.dir, *store_);
  EXPECT_EQ(id.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(id.status().message().find("region_7f0000000000.bin"), std::string::npos)
      << id.status();
  EXPECT_EQ(store_->Stats().captures(), 0u);  // nothing partial became visible
}

TEST_F(ReferenceImportTest, MalformedInputsNameFileAndField) {
  struct Case {
    std::function<void(RefFolder&)> damage;
    std::string expect1, expect2;
  };
  std::vector<Case> cases = {
      {[](RefFolder& r) { std::filesystem::remove(r.dir + "/metadata.json"); }, "metadata.json",
       "missing"},
      {[](RefFolder& r) { Write(r.dir + "/dispatch.json", "{not json"); }, "dispatch.json",
       "not valid JSON"},
      {[](RefFolder& r) { Write(r.dir + "/memory_regions.json", R"({"regions": 3})"); },
       "memory_regions.json", "regions"},
      {[](RefFolder& r) {
         r.regions["regions"][1].erase("size");
         Write(r.dir + "/memory_regions.json", r.regions.dump());
       },
       "memory_regions.json", "regions[1].size"},
      {[](RefFolder& r) {
         r.metadata["kernarg_slots"][2]["offset"] = "banana";
         Write(r.dir + "/metadata.json", r.metadata.dump());
       },
       "metadata.json", "kernarg_slots[2].offset"},
      {[](RefFolder& r) {
         r.metadata["hsaco_sha256"] = std::string(64, '0');
         Write(r.dir + "/metadata.json", r.metadata.dump());
       },
       "metadata.json", "hsaco_sha256"},
      {[](RefFolder& r) { std::filesystem::remove(r.dir + "/kernel.hsaco"); }, "kernel.hsaco",
       "missing"},
      {[](RefFolder& r) { std::filesystem::remove(r.dir + "/kernarg_raw.bin"); }, "kernarg_raw.bin",
       "missing"},
      {[](RefFolder& r) { Write(r.dir + "/memory/region_7f0000000000.bin", "short"); },
       "region_7f0000000000.bin", "has 5 bytes"},
      {[](RefFolder& r) {
         Write(r.dir + "/module_variables.json",
               R"({"variables":[{"name":"v","size":8,"blob":"!!!not-b64!!!"}]})");
       },
       "module_variables.json", "variables[0].blob"},
      // A region or variable whose base + size wraps past 2^64.
      {[](RefFolder& r) {
         r.regions["regions"][1]["base"] = "0xffffffffffff0000";
         Write(r.dir + "/memory_regions.json", r.regions.dump());
       },
       "region 'regions[1]' (base 0xffffffffffff0000", "wraps the 64-bit address space"},
      {[](RefFolder& r) {
         r.regions["regions"][0]["base"] = "0xffffffffffffffff";
         r.regions["regions"][0]["size"] = 1;  // ends exactly at 2^64: wraps to 0
         Write(r.dir + "/memory_regions.json", r.regions.dump());
       },
       "regions[0]", "wraps the 64-bit address space"},
      {[](RefFolder& r) {
         Write(r.dir + "/module_variables.json",
               R"({"variables":[{"name":"v","size":3,"address":18446744073709551615,)"
               R"("blob":"eHl6"}]})");
       },
       "module_variables.json", "variable 'variables[0]' (v, address 0xffffffffffffffff"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    TempDir root;
    RefFolder ref(root.path());
    ref.WriteAll();
    cases[i].damage(ref);
    auto id = ImportReferenceCapture(ref.dir, *store_);
    EXPECT_EQ(id.status().code(), absl::StatusCode::kInvalidArgument) << i << " " << id.status();
    EXPECT_NE(id.status().message().find(cases[i].expect1), std::string::npos) << id.status();
    EXPECT_NE(id.status().message().find(cases[i].expect2), std::string::npos) << id.status();
  }
  EXPECT_EQ(store_->Stats().captures(), 0u);
  EXPECT_EQ(ImportReferenceCapture(folder_root_.Sub("nope"), *store_).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// The daemon reads the folder with its own rights for a local user: nothing
// outside the folder may be reached through it.
TEST_F(ReferenceImportTest, SymbolicLinksAreNeverFollowed) {
  TempDir outside;
  Write(outside.Sub("secret"), "the daemon's secret");
  std::filesystem::create_directories(outside.Sub("mem"));
  struct Case {
    std::string file;   // replaced by a link
    std::string target;
    bool directory;
  };
  std::vector<Case> cases = {
      {"kernel.hsaco", outside.Sub("secret"), false},
      {"kernarg_raw.bin", outside.Sub("secret"), false},
      {"metadata.json", outside.Sub("secret"), false},
      {"memory", outside.Sub("mem"), true},
      {"memory/region_7f0000000000.bin", outside.Sub("secret"), false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.file);
    TempDir root;
    RefFolder ref(root.path());
    ref.WriteAll();
    if (c.directory) {
      // The linked folder holds the same files: only the link is wrong.
      std::filesystem::copy(ref.dir + "/memory", c.target,
                            std::filesystem::copy_options::overwrite_existing);
      std::filesystem::remove_all(ref.dir + "/memory");
    } else {
      std::filesystem::remove(ref.dir + "/" + c.file);
    }
    std::filesystem::create_symlink(c.target, ref.dir + "/" + c.file);
    auto id = ImportReferenceCapture(ref.dir, *store_);
    EXPECT_EQ(id.status().code(), absl::StatusCode::kInvalidArgument) << id.status();
    EXPECT_NE(id.status().message().find("symbolic link"), std::string::npos) << id.status();
  }
  EXPECT_EQ(store_->Stats().captures(), 0u);
  // Names that leave the folder are refused outright.
  RefFolder ref(folder_root_.path());
  ref.WriteAll();
  ref.regions["regions"][0]["file"] = "../../" + outside.Sub("secret");
  Write(ref.dir + "/memory_regions.json", ref.regions.dump());
  auto id = ImportReferenceCapture(ref.dir, *store_);
  EXPECT_EQ(id.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(id.status().message().find("not a plain name inside the folder"), std::string::npos)
      << id.status();
}

// A FIFO used to block the import (and the RPC) forever waiting for a
// writer; devices and directories are not capture files either.
TEST_F(ReferenceImportTest, OnlyRegularFilesAreRead) {
  RefFolder ref(folder_root_.path());
  ref.WriteAll();
  std::filesystem::remove(ref.dir + "/kernarg_raw.bin");
  ASSERT_EQ(::mkfifo((ref.dir + "/kernarg_raw.bin").c_str(), 0600), 0);
  auto result = std::async(std::launch::async,
                           [&] { return ImportReferenceCapture(ref.dir, *store_); });
  if (result.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
    ADD_FAILURE() << "the import blocked on a FIFO";
    // Unblock it so the test can end.
    int fd = ::open((ref.dir + "/kernarg_raw.bin").c_str(), O_WRONLY);
    if (fd >= 0) ::close(fd);
  }
  auto id = result.get();
  EXPECT_EQ(id.status().code(), absl::StatusCode::kInvalidArgument) << id.status();
  EXPECT_NE(id.status().message().find("not a regular file"), std::string::npos) << id.status();
  std::filesystem::remove(ref.dir + "/kernarg_raw.bin");
  std::filesystem::create_symlink("/dev/zero", ref.dir + "/kernarg_raw.bin");
  EXPECT_EQ(ImportReferenceCapture(ref.dir, *store_).status().code(),
            absl::StatusCode::kInvalidArgument);
  std::filesystem::remove(ref.dir + "/kernarg_raw.bin");
  std::filesystem::create_directories(ref.dir + "/kernarg_raw.bin");
  EXPECT_NE(ImportReferenceCapture(ref.dir, *store_).status().message().find("not a regular file"),
            std::string::npos);
}

// Region sizes come from memory_regions.json: they are checked against the
// files before the store allocates anything for them.
TEST_F(ReferenceImportTest, DeclaredSizesAreCheckedBeforeAnythingIsAllocated) {
  RefFolder ref(folder_root_.path());
  ref.WriteAll();
  ref.regions["regions"][0]["size"] = 1ull << 45;  // 32 TiB; the file holds 5 MiB
  Write(ref.dir + "/memory_regions.json", ref.regions.dump());
  auto id = ImportReferenceCapture(ref.dir, *store_);
  EXPECT_EQ(id.status().code(), absl::StatusCode::kInvalidArgument) << id.status();
  EXPECT_NE(id.status().message().find("exceeds the capture limits"), std::string::npos)
      << id.status();
  ref.regions["regions"][0]["size"] = (1ull << 40) + 1;
  Write(ref.dir + "/memory_regions.json", ref.regions.dump());
  id = ImportReferenceCapture(ref.dir, *store_);
  EXPECT_NE(id.status().message().find("has 5246976 bytes but memory_regions.json says"),
            std::string::npos)
      << id.status();
  EXPECT_EQ(store_->ingests_in_flight(), 0);
}

}  // namespace
}  // namespace kerncap::import
