// store_test_util.h: helpers shared by the store's tests (test-only).
#ifndef KERNCAP_DAEMON_STORE_STORE_TEST_UTIL_H_
#define KERNCAP_DAEMON_STORE_STORE_TEST_UTIL_H_

#include <stdlib.h>

#include <cstdint>
#include <filesystem>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "daemon/store/store.h"
#include "gtest/gtest.h"

namespace kerncap::store::testing {

// A fresh directory under $TMPDIR, removed when the object dies.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "kcstore-XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data());
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string Sub(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline std::string RandomBytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string s(n, '\0');
  for (size_t i = 0; i + 8 <= n; i += 8) {
    uint64_t v = rng();
    std::memcpy(s.data() + i, &v, 8);
  }
  for (size_t i = n - n % 8; i < n; ++i) s[i] = static_cast<char>(rng());
  return s;
}

// Compressible, non-zero bytes (a repeating text-like pattern).
inline std::string TextBytes(size_t n, uint64_t seed) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>('a' + (i * 7 + seed + i / 97) % 26);
  return s;
}

inline StoreOptions SmallOptions(const std::string& dir) {
  StoreOptions o;
  o.dir = dir;
  o.chunk_size = 64 << 10;
  o.workers = 2;
  // One open pack: many tests count packs, and with several stripes the
  // layout depends on which worker took which chunk. Striped appends have
  // their own tests (StripedAppenderTest, StoreTest.StripedPacks*).
  o.append_stripes = 1;
  o.pack_target_bytes = 1 << 20;
  o.max_inflight_bytes = 512 << 10;
  return o;
}

struct TestRegion {
  uint64_t va;
  std::string bytes;
};

// Ingests `pre` (and `post`) regions in one capture and commits it.
inline absl::StatusOr<std::string> IngestCapture(Store& store, const std::vector<TestRegion>& pre,
                                                 const std::vector<TestRegion>& post = {},
                                                 v1::CaptureManifest manifest = {}) {
  auto ingest = store.BeginCapture();
  if (!ingest.ok()) return ingest.status();
  auto add = [&](ImageKind kind, const TestRegion& r) -> absl::Status {
    v1::Region region;
    region.set_va(r.va);
    region.set_kind(v1::REGION_DEVICE);
    region.mutable_data()->set_size(r.bytes.size());
    auto h = (*ingest)->AddRegion(kind, region);
    if (!h.ok()) return h.status();
    return (*ingest)->WriteRegion(*h, 0, r.bytes.data(), r.bytes.size(), nullptr);
  };
  for (const auto& r : pre) {
    absl::Status st = add(ImageKind::kPre, r);
    if (!st.ok()) return st;
  }
  for (const auto& r : post) {
    absl::Status st = add(ImageKind::kPost, r);
    if (!st.ok()) return st;
  }
  if (manifest.kernel().mangled_name().empty())
    manifest.mutable_kernel()->set_mangled_name("_Z4testv");
  return (*ingest)->Commit(std::move(manifest));
}

// Reads region `i` of the manifest's pre image back in full.
inline std::string ReadPre(Store& store, const v1::CaptureManifest& m, int i) {
  const auto& list = m.pre().regions(i).data();
  std::string out(list.size(), '\0');
  absl::Status st = store.ReadChunkList(list, out.data(), out.size());
  EXPECT_TRUE(st.ok()) << st;
  return out;
}

inline std::vector<v1::VerifyProblem> VerifyProblems(Store& store, absl::string_view id = "",
                                                     bool rehash = true) {
  std::vector<v1::VerifyProblem> problems;
  bool done = false;
  absl::Status st = store.Verify(id, rehash, [&](const v1::VerifyProgress& p) {
    for (const auto& pr : p.problems()) problems.push_back(pr);
    done = p.done();
  });
  EXPECT_TRUE(st.ok()) << st;
  EXPECT_TRUE(done);
  return problems;
}

}  // namespace kerncap::store::testing

#endif  // KERNCAP_DAEMON_STORE_STORE_TEST_UTIL_H_
