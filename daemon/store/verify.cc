// verify.cc: integrity check of every chunk reachable from one capture or
// from all of them: the stored bytes' XXH3, a full decode (zstd's frame
// checksum covers the raw bytes) and, with rehash, SHA-256 against the
// content address. Problems name the capture, the chunk and the pack.
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "daemon/store/store_impl.h"

namespace kerncap::store {

absl::Status Store::Impl::Verify(absl::string_view capture_id, bool rehash,
                                 const std::function<void(const v1::VerifyProgress&)>& progress) {
  std::vector<std::string> ids;
  if (!capture_id.empty()) {
    KC_ASSIGN_OR_RETURN(std::string id, Resolve(capture_id));
    ids.push_back(id);
  } else {
    absl::MutexLock l(&ids_mu_);
    ids.assign(ids_.begin(), ids_.end());
  }
  v1::VerifyProgress frame;
  uint64_t problems_total = 0;
  auto problem = [&](const std::string& cap, const Digest* d, const std::string& pack,
                     absl::string_view what) {
    v1::VerifyProblem* p = frame.add_problems();
    p->set_capture_id(cap);
    if (d != nullptr) p->set_chunk_digest(d->ToBytes());
    p->set_pack(pack);
    p->set_what(std::string(what));
    ++problems_total;
  };
  if (capture_id.empty()) {
    absl::MutexLock l(&packs_mu_);
    for (const std::string& q : quarantined_) {
      problem("", nullptr, q.substr(0, q.find(':')), absl::StrCat("pack quarantined: ", q));
    }
  }

  // Every chunk once, with every capture that uses it: a damaged chunk is
  // reported for each of them (deleting one capture does not cure another).
  std::vector<Digest> work;
  absl::flat_hash_map<Digest, std::vector<const std::string*>> users;
  for (const std::string& id : ids) {
    auto m = LoadManifest(id);
    // NotFound: the ref is gone (deleted meanwhile). A missing or damaged
    // manifest behind a ref is DataLoss and reported below.
    if (absl::IsNotFound(m.status()) && capture_id.empty()) continue;
    if (!m.ok()) {
      problem(id, nullptr, "", m.status().message());
      continue;
    }
    absl::flat_hash_set<Digest> mine;
    ForEachManifestChunk(*m, [&](const Digest& d) {
      if (!mine.insert(d).second) return;
      std::vector<const std::string*>& u = users[d];
      if (u.empty()) work.push_back(d);
      u.push_back(&id);
    });
  }
  frame.set_chunks_total(work.size());

  std::string raw;
  uint64_t checked = 0;
  for (const Digest& d : work) {
    std::string pack;
    std::string what;
    auto c = ReadStored(d, &pack);
    if (!c.ok()) {
      what = absl::IsNotFound(c.status())
                 ? absl::StrCat("chunk ", d.ToHex(), " is missing from the store")
                 : std::string(c.status().message());
    } else {
      raw.resize(c->raw_size);
      absl::Status st =
          DecodeChunk(static_cast<uint8_t>(c->codec), c->data, c->raw_size, raw.data(),
                      absl::StrCat("chunk ", d.ToHex(), " in pack ", pack));
      if (!st.ok()) {
        what = std::string(st.message());
      } else if (rehash && Sha256(raw) != d) {
        what = absl::StrCat("chunk ", d.ToHex(), " in pack ", pack,
                            ": content does not match its SHA-256");
      }
    }
    if (!what.empty()) {
      for (const std::string* cap : users[d]) problem(*cap, &d, pack, what);
    }
    frame.set_chunks_checked(++checked);
    if (checked % 256 == 0 && progress) {
      progress(frame);
      frame.clear_problems();
    }
  }
  frame.set_chunks_checked(checked);
  frame.set_done(true);
  if (progress) progress(frame);
  log::Info("store.verified", {{"captures", ids.size()},
                               {"chunks", checked},
                               {"problems", problems_total},
                               {"rehash", rehash}});
  return absl::OkStatus();
}

}  // namespace kerncap::store
