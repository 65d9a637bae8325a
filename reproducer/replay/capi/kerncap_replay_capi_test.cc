// Unit tests of libkerncap_replay.so through its C API (linked against the
// shared library itself, so only its exported symbols are used). Needs no
// GPU: opening, describing, translating before prepare, option parsing and
// every error path; prepare without a driver where there is none.
//
// The captures are written by the replay_capi_fixture binary: this test must
// not link kerncap's protobuf code itself, because the library carries its
// own copy of the generated kerncap/v1 descriptors and both would register
// them in the one libprotobuf.so of the process (a fatal duplicate).
#include "reproducer/replay/capi/kerncap_replay_capi.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace kerncap::replay {
namespace {

using nlohmann::json;
// capi_test_fixture.h's layout.
constexpr uint64_t kCapiTableVa = 0x7f3b00000000;
constexpr uint64_t kCapiDataVa = 0x7f3b00200000;
constexpr uint32_t kCapiN = 100000;
constexpr uint64_t kCapiHostVa = 0x7f3c00001000;
constexpr uint64_t kCapiGlobalVa = 0x7f3d00000400;
constexpr uint64_t kCapiKernargVa = 0x7f3e00000000;
constexpr uint64_t kCapiByValue = 0x1234567890abcdefull;

bool HaveCudaDriver() {
  void* h = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) return false;
  ::dlclose(h);
  return true;
}

class CapiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("kc_replay_capi_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override {
    if (r_ != nullptr) kerncap_replay_close(r_);
    std::filesystem::remove_all(dir_);
  }
  std::string Path(const std::string& name) { return (dir_ / name).string(); }

  std::string WriteFixture(bool rich, const std::string& name = "c.kcap",
                           const std::string& flags = "") {
    const std::string cmd = std::string("'") + KERNCAP_REPLAY_FIXTURE + "' '" + Path(name) +
                            "'" + (rich ? " --rich" : "") + flags;
    EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
    return Path(name);
  }

  // Opens (failing the test when it cannot).
  kerncap_replay* Open(const std::string& path, const char* options = nullptr) {
    char err[512] = "untouched";
    kerncap_replay* r = kerncap_replay_open(path.c_str(), options, err, sizeof(err));
    EXPECT_NE(r, nullptr) << err;
    return r;
  }

  // The error of an open that must fail.
  std::string OpenError(const char* path, const char* options = nullptr) {
    char err[512] = "untouched";
    kerncap_replay* r = kerncap_replay_open(path, options, err, sizeof(err));
    EXPECT_EQ(r, nullptr);
    kerncap_replay_close(r);
    return err;
  }

  json Info(kerncap_replay* r) {
    const char* text = kerncap_replay_info_json(r);
    EXPECT_NE(text, nullptr);
    return text == nullptr ? json() : json::parse(text);
  }

  std::filesystem::path dir_;
  kerncap_replay* r_ = nullptr;
};

TEST_F(CapiTest, InfoDescribesTheCapture) {
  r_ = Open(WriteFixture(/*rich=*/true));
  ASSERT_NE(r_, nullptr);
  const json j = Info(r_);
  EXPECT_EQ(j["capture_id"], "cap-capi-selftest");
  EXPECT_EQ(j["capture_path"], Path("c.kcap"));
  EXPECT_EQ(j["kernel"]["name"], "add_one");
  EXPECT_EQ(j["kernel"]["demangled"], "add_one(unsigned long long**, unsigned int)");
  EXPECT_EQ(j["kernel"]["platform"], "cuda");
  EXPECT_EQ(j["kernel"]["arch"], "sm_90");
  EXPECT_EQ(j["kernel"]["jit_metadata"]["num_warps"], 8);  // parsed, not a string
  EXPECT_EQ(j["device"]["ordinal"], 0);
  EXPECT_EQ(j["device"]["name"], "NVIDIA H200");
  EXPECT_EQ(j["device"]["arch"], "sm_90");
  EXPECT_EQ(j["prepared"], false);
  EXPECT_EQ(j["relocated"], false);
  EXPECT_EQ(j["post_complete"], true);
  EXPECT_FALSE(j.contains("replay"));
  EXPECT_FALSE(j.contains("replay_device"));

  const json& l = j["launch"];
  EXPECT_EQ(l["grid"], json::array({(kCapiN + 255) / 256, 2, 1}));
  EXPECT_EQ(l["block"], json::array({256, 1, 1}));
  EXPECT_EQ(l["shared_bytes"], 4096);
  EXPECT_EQ(l["cluster"], json::array({2, 1, 1}));
  EXPECT_EQ(l["cooperative"], false);
  EXPECT_EQ(l["attributes"]["func.max_dynamic_shared_size_bytes"], 4096);

  EXPECT_EQ(j["argument_blob_hex"].get<std::string>().size(), 64u);
  const json& a = j["arguments"];
  ASSERT_EQ(a.size(), 4u);
  EXPECT_EQ(a[0]["index"], 0);
  EXPECT_EQ(a[0]["offset"], 0);
  EXPECT_EQ(a[0]["size"], 8);
  EXPECT_EQ(a[0]["kind"], "pointer");
  EXPECT_EQ(a[0]["name"], "table");
  EXPECT_EQ(a[0]["hex"], "000000003b7f0000");  // 0x7f3b00000000, little-endian
  EXPECT_EQ(a[0]["pointer_region"], 0);
  EXPECT_EQ(a[0]["pointer_offset"], 0);
  EXPECT_EQ(a[1]["offset"], 8);
  EXPECT_EQ(a[1]["size"], 4);
  EXPECT_EQ(a[1]["kind"], "by_value");
  EXPECT_EQ(a[1]["hex"], "a0860100");  // 100000
  EXPECT_EQ(a[1]["pointer_region"], -1);
  EXPECT_FALSE(a[1].contains("pointer_offset"));
  EXPECT_EQ(a[2]["hex"], "efcdab9078563412");
  EXPECT_EQ(a[2]["type_name"], "unsigned long long");
  EXPECT_EQ(a[2]["pointer_region"], -1);  // 8 bytes, but in no region
  EXPECT_EQ(a[3]["kind"], "unspecified");
  EXPECT_EQ(a[3]["pointer_region"], 1);   // 16 bytes into the data region
  EXPECT_EQ(a[3]["pointer_offset"], 16);

  const json& rg = j["regions"];
  ASSERT_EQ(rg.size(), 5u);
  EXPECT_EQ(rg[0]["index"], 0);
  EXPECT_EQ(rg[0]["captured_va"].get<uint64_t>(), kCapiTableVa);
  EXPECT_EQ(rg[0]["size"], 8);
  EXPECT_EQ(rg[0]["kind"], "device");
  EXPECT_EQ(rg[0]["name"], "");
  EXPECT_EQ(rg[0]["host"], false);
  EXPECT_EQ(rg[0]["written"], false);  // in the post image, unchanged
  EXPECT_EQ(rg[1]["captured_va"].get<uint64_t>(), kCapiDataVa);
  EXPECT_EQ(rg[1]["size"], kCapiN * 8);
  EXPECT_EQ(rg[1]["written"], true);
  EXPECT_EQ(rg[2]["captured_va"].get<uint64_t>(), kCapiHostVa);
  EXPECT_EQ(rg[2]["kind"], "host_pinned");
  EXPECT_EQ(rg[2]["host"], true);
  EXPECT_EQ(rg[2]["written"], false);  // not in the post image at all
  EXPECT_EQ(rg[3]["captured_va"].get<uint64_t>(), kCapiGlobalVa);
  EXPECT_EQ(rg[3]["kind"], "module_global");
  EXPECT_EQ(rg[3]["name"], "kc_scale");
  EXPECT_EQ(rg[3]["size"], 4);
  EXPECT_EQ(rg[4]["captured_va"].get<uint64_t>(), kCapiKernargVa);
  EXPECT_EQ(rg[4]["kind"], "kernarg");
  for (const json& r : rg) {
    EXPECT_FALSE(r.contains("replay_va")) << r;  // placement only after prepare
    EXPECT_FALSE(r.contains("restored")) << r;
  }
}

TEST_F(CapiTest, InfoListsTextureObjects) {
  r_ = Open(WriteFixture(/*rich=*/true, "t.kcap", " --texture"));
  ASSERT_NE(r_, nullptr);
  const json j = Info(r_);
  ASSERT_EQ(j["texture_objects"].size(), 1u);
  const json& t = j["texture_objects"][0];
  EXPECT_EQ(t["type"], "texture");
  EXPECT_EQ(t["captured_handle"].get<uint64_t>(), kCapiByValue);
  EXPECT_EQ(t["argument_offsets"], json::array({16}));
  EXPECT_EQ(t["captured_ptr"].get<uint64_t>(), kCapiDataVa);
  EXPECT_EQ(t["bytes"], 4096);
  EXPECT_FALSE(t.contains("replay_handle"));  // only after prepare
  EXPECT_FALSE(j["arguments"][2].contains("replay_hex"));
  // Without texture objects the list is there, empty.
  kerncap_replay_close(r_);
  r_ = Open(WriteFixture(/*rich=*/true));
  ASSERT_NE(r_, nullptr);
  EXPECT_EQ(Info(r_)["texture_objects"], json::array());
}

TEST_F(CapiTest, PlainFixtureHasNoMetadataAndDefaultDims) {
  r_ = Open(WriteFixture(/*rich=*/false));
  ASSERT_NE(r_, nullptr);
  const json j = Info(r_);
  EXPECT_FALSE(j["kernel"].contains("jit_metadata"));
  EXPECT_EQ(j["launch"]["grid"], json::array({(kCapiN + 255) / 256, 1, 1}));
  EXPECT_EQ(j["launch"]["cluster"], json::array({1, 1, 1}));
  EXPECT_EQ(j["argument_blob_hex"], "000000003b7f0000a0860100");
  EXPECT_EQ(j["regions"].size(), 2u);
  // The pointer is owned by the handle and stays valid until the next call.
  const char* a = kerncap_replay_info_json(r_);
  const std::string copy = a;
  EXPECT_EQ(json::parse(copy), j);
}

TEST_F(CapiTest, TranslateBeforePrepareIsZero) {
  r_ = Open(WriteFixture(true));
  ASSERT_NE(r_, nullptr);
  EXPECT_EQ(kerncap_replay_translate(r_, kCapiDataVa), 0u);
  EXPECT_EQ(kerncap_replay_translate(r_, kCapiDataVa + 8), 0u);
  EXPECT_EQ(kerncap_replay_translate(r_, 0x1000), 0u);
  EXPECT_EQ(kerncap_replay_translate(nullptr, kCapiDataVa), 0u);
}

TEST_F(CapiTest, PrepareWithoutAGpuFailsClearly) {
  if (HaveCudaDriver()) {
    GTEST_SKIP() << "libcuda.so.1 is present here: prepare is covered by replay_capi_gpu_test";
  }
  r_ = Open(WriteFixture(true));
  ASSERT_NE(r_, nullptr);
  for (int attempt = 0; attempt < 2; ++attempt) {  // retrying fails the same way
    char err[512] = "untouched";
    EXPECT_EQ(kerncap_replay_prepare(r_, err, sizeof(err)), KERNCAP_REPLAY_E_NO_DEVICE);
    EXPECT_NE(std::string(err).find("no CUDA driver"), std::string::npos) << err;
    EXPECT_NE(std::string(err).find("libcuda.so.1"), std::string::npos) << err;
    EXPECT_EQ(std::string(err).find('\n'), std::string::npos) << err;
  }
  // The handle still describes the capture.
  EXPECT_EQ(Info(r_)["prepared"], false);
  char err[512] = "untouched";
  double ms = -1;
  EXPECT_EQ(kerncap_replay_launch(r_, &ms, err, sizeof(err)), KERNCAP_REPLAY_E_NO_DEVICE);
  EXPECT_NE(std::string(err).find("no CUDA driver"), std::string::npos) << err;
  EXPECT_EQ(ms, -1);
  EXPECT_EQ(kerncap_replay_restore_inputs(r_, err, sizeof(err)), KERNCAP_REPLAY_E_NO_DEVICE);
  EXPECT_NE(std::string(err).find("no CUDA driver"), std::string::npos) << err;
  char* report = nullptr;
  EXPECT_EQ(kerncap_replay_bench(r_, nullptr, &report, err, sizeof(err)),
            KERNCAP_REPLAY_E_NO_DEVICE);
  EXPECT_NE(std::string(err).find("no CUDA driver"), std::string::npos) << err;
  EXPECT_EQ(report, nullptr);
  // Bad options are said before the GPU is needed.
  EXPECT_EQ(kerncap_replay_bench(r_, R"({"iterations":"many"})", &report, err, sizeof(err)),
            KERNCAP_REPLAY_E_USAGE);
  EXPECT_NE(std::string(err).find("'iterations' must be an integer"), std::string::npos) << err;
}

TEST_F(CapiTest, ValidateNeedsAPreparedReplay) {
  r_ = Open(WriteFixture(true));
  ASSERT_NE(r_, nullptr);
  char err[512] = "untouched";
  char* report = reinterpret_cast<char*>(0x1);
  EXPECT_EQ(kerncap_replay_validate(r_, nullptr, &report, err, sizeof(err)),
            KERNCAP_REPLAY_E_REPLAY);
  EXPECT_EQ(report, nullptr);
  EXPECT_NE(std::string(err).find("not prepared"), std::string::npos) << err;
  EXPECT_EQ(kerncap_replay_validate(r_, nullptr, nullptr, err, sizeof(err)),
            KERNCAP_REPLAY_E_USAGE);
  EXPECT_NE(std::string(err).find("report_json is NULL"), std::string::npos) << err;
}

// Validate options are parsed (and rejected) before the replay state is
// looked at: a good set gets as far as "not prepared".
TEST_F(CapiTest, ValidateOptionsAreCheckedFirst) {
  r_ = Open(WriteFixture(true));
  ASSERT_NE(r_, nullptr);
  struct Case {
    const char* options;
    const char* message;  // nullptr: valid (fails on "not prepared")
  } cases[] = {
      {"", nullptr},
      {"null", nullptr},
      {R"({"dtype":"f32","atol":1e-3,"rtol":0.01,"ulp":2})", nullptr},
      {R"({"dtype":"bf16","nan_unequal":true})", nullptr},
      {R"({"regions":{"1":{"dtype":"u64"}}})", nullptr},
      {R"({"atol":1,"regions":{"1":{"dtype":"u64"}}})", nullptr},
      {R"({"dtype":"f32","regions":{"kc_scale":{"atol":0.5}}})", nullptr},
      {R"({"regions":{"0x7f3b00200000":{"dtype":"i64","ulp":3}}})", nullptr},
      {R"({"ulp":2.0,"dtype":"f16"})", nullptr},
      {"{", "not JSON"},
      {"[1]", "must be a JSON object"},
      {R"({"atol":1e-3})", "no dtype"},
      {R"({"dtype":"f7"})", "f7"},
      {R"({"dtype":3})", "'dtype' must be a string"},
      {R"({"atol":-1,"dtype":"f32"})", "'atol' must be a number >= 0"},
      {R"({"rtol":"x","dtype":"f32"})", "'rtol' must be a number >= 0"},
      {R"({"ulp":-1,"dtype":"f32"})", "'ulp' must be an integer >= 0"},
      {R"({"ulp":1.5,"dtype":"f32"})", "'ulp' must be an integer >= 0"},
      {R"({"tolerance":1})", "unknown key 'tolerance'"},
      {R"({"nan_unequal":1})", "'nan_unequal' must be a bool"},
      {R"({"regions":[1]})", "'regions' must be an object"},
      {R"({"regions":{"7":{"dtype":"f32"}}})", "regions['7']: no such region"},
      {R"({"regions":{"nope":{"dtype":"f32"}}})", "regions['nope']: no such region"},
      {R"({"regions":{"0x1000":{"dtype":"f32"}}})", "regions['0x1000']: no such region"},
      {R"({"regions":{"0xzz":{"dtype":"f32"}}})", "bad address"},
      {R"({"regions":{"1":{}}})", "sets nothing"},
      {R"({"regions":{"1":2}})", "must be an object"},
      {R"({"regions":{"1":{"atol":1}}})", "need a dtype"},
      {R"({"regions":{"1":{"dtype":"u64","bogus":1}}})", "unknown key 'bogus'"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.options);
    char err[512] = "untouched";
    char* report = nullptr;
    const int rc = kerncap_replay_validate(r_, c.options, &report, err, sizeof(err));
    EXPECT_EQ(report, nullptr);
    if (c.message == nullptr) {
      EXPECT_EQ(rc, KERNCAP_REPLAY_E_REPLAY);
      EXPECT_NE(std::string(err).find("not prepared"), std::string::npos) << err;
    } else {
      EXPECT_EQ(rc, KERNCAP_REPLAY_E_USAGE);
      EXPECT_NE(std::string(err).find(c.message), std::string::npos) << err;
    }
  }
}

TEST_F(CapiTest, BadPathsGiveClearErrors) {
  const std::string missing = Path("missing.kcap");
  std::string e = OpenError(missing.c_str());
  EXPECT_NE(e.find(missing), std::string::npos) << e;
  EXPECT_NE(e.find("no such file"), std::string::npos) << e;

  e = OpenError(nullptr);
  EXPECT_NE(e.find("capture_path is empty"), std::string::npos) << e;
  e = OpenError("");
  EXPECT_NE(e.find("capture_path is empty"), std::string::npos) << e;

  const std::string junk = Path("junk.kcap");
  std::ofstream(junk) << "this is not a capture\n";
  e = OpenError(junk.c_str());
  EXPECT_NE(e.find(junk), std::string::npos) << e;
  EXPECT_EQ(e.find('\n'), std::string::npos) << e;

  std::filesystem::create_directories(Path("empty"));
  e = OpenError(Path("empty").c_str());
  EXPECT_NE(e.find("holds no capture.kcap"), std::string::npos) << e;
}

TEST_F(CapiTest, OpensAFolderHoldingTheCapture) {
  std::filesystem::create_directories(Path("project"));
  WriteFixture(false, "project/capture.kcap");
  WriteFixture(false, "project/other.kcap");
  r_ = Open(Path("project"));
  ASSERT_NE(r_, nullptr);
  EXPECT_EQ(Info(r_)["capture_path"], Path("project/capture.kcap"));
  kerncap_replay_close(r_);
  r_ = nullptr;

  // Without capture.kcap: the only .kcap file, else an error naming the count.
  std::filesystem::create_directories(Path("single"));
  WriteFixture(false, "single/cap-1.kcap");
  r_ = Open(Path("single"));
  ASSERT_NE(r_, nullptr);
  EXPECT_EQ(Info(r_)["capture_path"], Path("single/cap-1.kcap"));
  std::filesystem::remove(Path("project/capture.kcap"));  // other.kcap is left
  WriteFixture(false, "project/third.kcap");
  const std::string e2 = OpenError(Path("project").c_str());
  EXPECT_NE(e2.find("holds 2 .kcap files"), std::string::npos) << e2;
}

TEST_F(CapiTest, OpenOptions) {
  const std::string path = WriteFixture(false);
  for (const char* good :
       {"", "{}", "null", R"({"device":-1,"allow_relocation":true,"force_relocation":false})",
        R"({"device":1,"allow_relocation":false,"code_object":null,"verify_digests":true})",
        R"({"force_relocation":true})"}) {
    SCOPED_TRACE(good);
    kerncap_replay* r = Open(path, good);
    kerncap_replay_close(r);
  }
  struct Case {
    const char* options;
    const char* message;
  } bad[] = {
      {"{", "not JSON"},
      {"[]", "must be a JSON object"},
      {R"({"device":"0"})", "'device' must be an integer >= -1"},
      {R"({"device":-2})", "'device' must be an integer >= -1"},
      {R"({"allow_relocation":1})", "'allow_relocation' must be a bool"},
      {R"({"force_relocation":"yes"})", "'force_relocation' must be a bool"},
      {R"({"code_object":5})", "'code_object' must be a path"},
      {R"({"code_object":"/nonexistent/k.cubin"})", "/nonexistent/k.cubin: no such file"},
      {R"({"relocate":true})", "unknown key 'relocate'"},
      {R"({"allow_relocation":false,"force_relocation":true})", "contradicting"},
  };
  for (const Case& c : bad) {
    SCOPED_TRACE(c.options);
    const std::string e = OpenError(path.c_str(), c.options);
    EXPECT_NE(e.find(c.message), std::string::npos) << e;
  }
}

TEST_F(CapiTest, ErrorsAreTruncatedAndOptional) {
  const std::string missing = Path("missing.kcap");
  char err[8];
  std::memset(err, 'x', sizeof(err));
  EXPECT_EQ(kerncap_replay_open(missing.c_str(), nullptr, err, sizeof(err)), nullptr);
  EXPECT_EQ(std::strlen(err), 7u);
  EXPECT_EQ(std::string(err), std::string("capture"));
  char one[1] = {'x'};
  EXPECT_EQ(kerncap_replay_open(missing.c_str(), nullptr, one, sizeof(one)), nullptr);
  EXPECT_EQ(one[0], '\0');
  EXPECT_EQ(kerncap_replay_open(missing.c_str(), nullptr, nullptr, 100), nullptr);
  EXPECT_EQ(kerncap_replay_open(missing.c_str(), nullptr, err, 0), nullptr);
  EXPECT_EQ(kerncap_replay_prepare(nullptr, nullptr, 0), KERNCAP_REPLAY_E_USAGE);
}

TEST_F(CapiTest, NullHandlesAreSafe) {
  kerncap_replay_close(nullptr);
  kerncap_replay_free(nullptr);
  EXPECT_EQ(kerncap_replay_info_json(nullptr), nullptr);
  char err[256] = "untouched";
  EXPECT_EQ(kerncap_replay_prepare(nullptr, err, sizeof(err)), KERNCAP_REPLAY_E_USAGE);
  EXPECT_NE(std::string(err).find("handle is NULL"), std::string::npos) << err;
  double ms = 0;
  EXPECT_NE(kerncap_replay_launch(nullptr, &ms, err, sizeof(err)), 0);
  EXPECT_NE(kerncap_replay_restore_inputs(nullptr, err, sizeof(err)), 0);
  char* report = nullptr;
  EXPECT_NE(kerncap_replay_validate(nullptr, nullptr, &report, err, sizeof(err)), 0);
  EXPECT_EQ(report, nullptr);
}

TEST(CapiVersionTest, VersionStrings) {
  ASSERT_NE(kerncap_replay_version(), nullptr);
  EXPECT_STRNE(kerncap_replay_version(), "");
  EXPECT_STRNE(kerncap_replay_version(), "unknown");
  EXPECT_EQ(kerncap_replay_capi_version(), KERNCAP_REPLAY_CAPI_VERSION);
}

// ---- the shared library's symbols and dependencies -------------------------

std::string RunCommand(const std::string& cmd) {
  std::string out;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  ::pclose(p);
  return out;
}

TEST(CapiLibraryTest, ExportsOnlyTheCApi) {
  if (RunCommand("command -v nm").empty()) GTEST_SKIP() << "nm (binutils) not installed";
  std::istringstream in(
      RunCommand(std::string("nm -D --defined-only '") + KERNCAP_REPLAY_SO + "'"));
  std::set<std::string> names;
  std::string line;
  while (std::getline(in, line)) {
    const size_t sp = line.find_last_of(' ');
    names.insert(sp == std::string::npos ? line : line.substr(sp + 1));
  }
  ASSERT_FALSE(names.empty()) << "nm found no symbols in " << KERNCAP_REPLAY_SO;
  for (const char* f :
       {"kerncap_replay_open", "kerncap_replay_prepare", "kerncap_replay_info_json",
        "kerncap_replay_translate", "kerncap_replay_launch", "kerncap_replay_restore_inputs",
        "kerncap_replay_validate", "kerncap_replay_bench", "kerncap_replay_free",
        "kerncap_replay_close",
        "kerncap_replay_version", "kerncap_replay_capi_version"}) {
    EXPECT_TRUE(names.count(f)) << f;
  }
  for (const std::string& s : names) {
    const bool allowed = s.rfind("kerncap_replay_", 0) == 0 || s.rfind("KERNCAP_", 0) == 0;
    EXPECT_TRUE(allowed) << "unexpected exported symbol: " << s;
  }
}

TEST(CapiLibraryTest, DoesNotLinkTheCudaDriver) {
  if (RunCommand("command -v objdump").empty()) GTEST_SKIP() << "objdump not installed";
  const std::string needed =
      RunCommand(std::string("objdump -p '") + KERNCAP_REPLAY_SO + "' | grep NEEDED");
  ASSERT_FALSE(needed.empty());
  EXPECT_EQ(needed.find("libcuda"), std::string::npos) << needed;  // dlopen'ed at run time
  EXPECT_EQ(needed.find("libcudart"), std::string::npos) << needed;
  EXPECT_EQ(needed.find("grpc"), std::string::npos) << needed;  // not needed by the replay
}

}  // namespace
}  // namespace kerncap::replay
