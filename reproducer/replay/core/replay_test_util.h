// replay_test_util.h: builds synthetic captures (.kcap files) for the replay
// tests: chunk lists with real SHA-256 addresses, zero chunks left out,
// chunks stored zstd-compressed or raw; and the add_one capture the CUDA
// replay tests (fake driver, GPU, C API) share.
#ifndef KERNCAP_REPRODUCER_REPLAY_CORE_REPLAY_TEST_UTIL_H_
#define KERNCAP_REPRODUCER_REPLAY_CORE_REPLAY_TEST_UTIL_H_

#include <zstd.h>

#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/digest.h"
#include "common/status_macros.h"
#include "format/kcap_file.h"
#include "kerncap/v1/control.pb.h"
#include "reproducer/replay/testing/add_one_ptx.h"

namespace kerncap::replay::testing {

class KcapBuilder {
 public:
  explicit KcapBuilder(uint32_t chunk_size) : chunk_size_(chunk_size) {}

  // Cuts `bytes` into chunks, records non-zero ones, returns the list.
  v1::ChunkList Add(const std::string& bytes) {
    v1::ChunkList l;
    l.set_size(bytes.size());
    l.set_chunk_size(chunk_size_);
    for (size_t off = 0; off < bytes.size(); off += chunk_size_) {
      std::string c = bytes.substr(off, chunk_size_);
      if (IsAllZero(c.data(), c.size())) {
        l.add_chunk_digests("");
        continue;
      }
      std::string d = Sha256(c).ToBytes();
      chunks_.emplace(d, c);
      l.add_chunk_digests(d);
    }
    return l;
  }

  // A post-dispatch diff region of `post` against `pre` (same size).
  v1::Region Diff(const v1::Region& pre_region, const std::string& pre, const std::string& post) {
    v1::Region r = pre_region;
    r.clear_data();
    r.set_diff(true);
    v1::ChunkList full = Add(post);
    v1::ChunkList* l = r.mutable_data();
    l->set_size(full.size());
    l->set_chunk_size(full.chunk_size());
    for (size_t i = 0, off = 0; off < post.size(); ++i, off += chunk_size_) {
      if (pre.compare(off, chunk_size_, post, off, chunk_size_) != 0) {
        r.add_changed_chunks(static_cast<uint32_t>(i));
        l->add_chunk_digests(full.chunk_digests(static_cast<int>(i)));
      }
    }
    return r;
  }

  absl::Status Write(const std::string& path, const v1::CaptureManifest& m,
                     bool compress = true) const {
    KC_ASSIGN_OR_RETURN(auto w, kcap::KcapWriter::Create(path));
    v1::TransferFrame mf;
    *mf.mutable_manifest() = m;
    mf.set_chunks_total(chunks_.size());
    KC_RETURN_IF_ERROR(w->Append(mf));
    bool alt = false;
    for (const auto& [d, c] : chunks_) {
      v1::TransferFrame f;
      v1::TransferChunk* tc = f.mutable_chunk();
      tc->set_digest(d);
      tc->set_raw_size(static_cast<uint32_t>(c.size()));
      alt = !alt;
      if (compress && alt) {
        std::string z(ZSTD_compressBound(c.size()), '\0');
        size_t n = ZSTD_compress(z.data(), z.size(), c.data(), c.size(), 1);
        z.resize(n);
        tc->set_codec(v1::CODEC_ZSTD);
        tc->set_data(z);
      } else {
        tc->set_codec(v1::CODEC_RAW);
        tc->set_data(c);
      }
      KC_RETURN_IF_ERROR(w->Append(f));
    }
    return w->Finish();
  }

  // Mutable access for corruption tests.
  std::map<std::string, std::string>& chunks() { return chunks_; }

 private:
  uint32_t chunk_size_;
  std::map<std::string, std::string> chunks_;
};

// The arguments of a kernel (T* p, unsigned n): exactly its parameter size
// (8 + 4), as the agent records it, and the two arguments' places.
inline void SetPointerAndCountArguments(v1::CaptureManifest& m, uint64_t pointer, uint32_t n) {
  std::string blob(12, '\0');
  std::memcpy(blob.data(), &pointer, 8);
  std::memcpy(blob.data() + 8, &n, 4);
  m.set_argument_blob(blob);
  v1::Argument* a0 = m.add_arguments();
  a0->set_offset(0);
  a0->set_size(8);
  v1::Argument* a1 = m.add_arguments();
  a1->set_offset(8);
  a1->set_size(4);
}

// The add_one capture (kAddOnePtx): pre region 0 at table_va holds one
// pointer to region 1 at data_va (n u64 values, value i = i * 3 + first);
// the post image says each value gained golden_delta (1 is right) and the
// table is unchanged. One PTX code object (code_name), launch
// ((n + 255) / 256) x 256, and the kernel's exact parameters: the 12-byte
// argument blob (table, n) and its two arguments (with typed_arguments
// also their kinds and names, as the agent records them from the cubin).
struct AddOneCaptureSpec {
  std::string capture_id;
  std::string code_name = "add_one.ptx";
  uint64_t table_va = 0;
  uint64_t data_va = 0;
  uint32_t n = 0;
  uint64_t first = 0;
  uint64_t golden_delta = 1;
  bool typed_arguments = false;
};

inline v1::CaptureManifest AddOneCapture(KcapBuilder& b, const AddOneCaptureSpec& s) {
  std::string table(8, '\0');
  std::memcpy(table.data(), &s.data_va, 8);
  std::string data(uint64_t{s.n} * 8, '\0'), post(uint64_t{s.n} * 8, '\0');
  for (uint64_t i = 0; i < s.n; ++i) {
    const uint64_t v = i * 3 + s.first, w = v + s.golden_delta;
    std::memcpy(data.data() + i * 8, &v, 8);
    std::memcpy(post.data() + i * 8, &w, 8);
  }
  v1::CaptureManifest m;
  m.set_capture_id(s.capture_id);
  m.set_post_complete(true);
  m.mutable_kernel()->set_mangled_name("add_one");
  m.mutable_kernel()->set_platform(v1::PLATFORM_CUDA);
  v1::Region* t = m.mutable_pre()->add_regions();
  t->set_va(s.table_va);
  t->set_kind(v1::REGION_DEVICE);
  *t->mutable_data() = b.Add(table);
  v1::Region* d = m.mutable_pre()->add_regions();
  d->set_va(s.data_va);
  d->set_kind(v1::REGION_DEVICE);
  *d->mutable_data() = b.Add(data);
  *m.mutable_post()->add_regions() = b.Diff(*t, table, table);  // unchanged
  *m.mutable_post()->add_regions() = b.Diff(*d, data, post);
  v1::CodeObject* c = m.add_code_objects();
  c->set_format(v1::CODE_OBJECT_PTX);
  c->set_name(s.code_name);
  *c->mutable_data() = b.Add(kAddOnePtx);
  m.mutable_launch()->add_grid((s.n + 255) / 256);
  m.mutable_launch()->add_block(256);
  SetPointerAndCountArguments(m, s.table_va, s.n);
  if (s.typed_arguments) {
    m.mutable_arguments(0)->set_kind(v1::ARG_POINTER);
    m.mutable_arguments(0)->set_name("table");
    m.mutable_arguments(1)->set_kind(v1::ARG_BY_VALUE);
    m.mutable_arguments(1)->set_name("n");
  }
  return m;
}

}  // namespace kerncap::replay::testing

#endif  // KERNCAP_REPRODUCER_REPLAY_CORE_REPLAY_TEST_UTIL_H_
