// replay_test_util.h: builds synthetic captures (.kcap files) for the replay
// tests: chunk lists with real SHA-256 addresses, zero chunks left out,
// chunks stored zstd-compressed or raw.
#ifndef KERNCAP_REPRODUCER_REPLAY_CORE_REPLAY_TEST_UTIL_H_
#define KERNCAP_REPRODUCER_REPLAY_CORE_REPLAY_TEST_UTIL_H_

#include <zstd.h>

#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "format/kcap_file.h"
#include "common/digest.h"
#include "common/status_macros.h"
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

}  // namespace kerncap::replay::testing

#endif  // KERNCAP_REPRODUCER_REPLAY_CORE_REPLAY_TEST_UTIL_H_
