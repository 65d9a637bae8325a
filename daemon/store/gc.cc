// gc.cc: mark and sweep over the chunk index.
//
// Mark: every chunk named by a committed manifest. Live also: every chunk an
// in-flight ingest references or wrote, and everything referenced or
// written after the mark began (gc_pins.h). The sweep decision and the
// removal of dead chunks from the index happen inside GcPins::Sweep, and
// workers pin a digest (GcPins::Note) *before* they look it up: so a chunk an
// ingest dedups against is either pinned before the sweep (kept) or looked
// up after it (missed, and written again).
//
// Then packs with no live chunk are deleted, and packs whose dead fraction
// exceeds gc_rewrite_threshold are rewritten: the new pack is durable and the
// index points at it before the old one is unlinked.
#include <unistd.h>

#include <cerrno>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/errno_status.h"
#include "common/file_util.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "daemon/store/store_impl.h"

namespace kerncap::store {

absl::StatusOr<v1::GcReport> Store::Impl::RunGc(bool dry_run) {
  absl::MutexLock gc_lock(&gc_mu_);
  const absl::Time start = absl::Now();
  pins_.BeginMark();

  // Mark.
  std::vector<std::string> ids;
  {
    absl::MutexLock l(&ids_mu_);
    ids.assign(ids_.begin(), ids_.end());
  }
  absl::flat_hash_set<Digest> live;
  for (const std::string& id : ids) {
    auto m = LoadManifest(id);
    if (absl::IsNotFound(m.status())) continue;  // deleted since we listed it
    if (!m.ok()) {
      pins_.EndMark();
      // Sweeping without knowing what this capture references could free
      // its chunks; refuse instead.
      return absl::Status(m.status().code(), absl::StrCat("GC aborted: ", m.status().message()));
    }
    ForEachManifestChunk(*m, [&](const Digest& d) { live.insert(d); });
  }

  // Sweep decision (and, for a real run, removal from the index).
  std::vector<std::pair<Digest, uint32_t>> dead;
  absl::flat_hash_set<Digest> dead_set;
  pins_.Sweep(live, [&] {
    index_.ForEach([&](const Digest& d, const ChunkLocation& loc) {
      if (!live.contains(d)) dead.emplace_back(d, loc.pack_id);
    });
    for (const auto& [d, pack] : dead) {
      dead_set.insert(d);
      if (!dry_run) index_.EraseIfIn(d, pack);
    }
  });

  // Packs to consider: listed before counting their live chunks, so a pack
  // sealed meanwhile (all live, not in this list) is never judged empty.
  // WithoutSeals makes a seal's AddPack and index inserts atomic to us.
  std::vector<std::pair<uint32_t, std::shared_ptr<PackReader>>> packs;
  appender_->WithoutSeals([&] {
    absl::MutexLock l(&packs_mu_);
    for (uint32_t id = 0; id < packs_.size(); ++id) {
      if (packs_[id]) packs.emplace_back(id, packs_[id]);
    }
  });

  // What each pack still holds that the index points at.
  struct Use {
    uint64_t live_bytes = 0;
    uint64_t live_chunks = 0;
  };
  absl::flat_hash_map<uint32_t, Use> use;
  index_.ForEach([&](const Digest& d, const ChunkLocation& loc) {
    if (dry_run && dead_set.contains(d)) return;
    Use& u = use[loc.pack_id];
    u.live_bytes += loc.stored_len;
    ++u.live_chunks;
  });
  v1::GcReport report;
  report.set_dry_run(dry_run);
  report.set_dead_chunks(dead.size());
  for (const auto& [id, pack] : packs) {
    const Use u = use.contains(id) ? use[id] : Use{};
    const uint64_t blob_bytes = pack->file_size() - PackTrailerSize(pack->entries().size());
    if (u.live_chunks == 0) {
      report.set_packs_deleted(report.packs_deleted() + 1);
      report.set_reclaimed_bytes(report.reclaimed_bytes() + pack->file_size());
      if (!dry_run) KC_RETURN_IF_ERROR(DeletePack(id, pack));
      continue;
    }
    const double dead_fraction =
        blob_bytes == 0 ? 0.0
                        : 1.0 - static_cast<double>(u.live_bytes) / static_cast<double>(blob_bytes);
    if (dead_fraction > opts_.gc_rewrite_threshold) {
      report.set_packs_rewritten(report.packs_rewritten() + 1);
      report.set_reclaimed_bytes(report.reclaimed_bytes() + blob_bytes - u.live_bytes);
      if (!dry_run) KC_RETURN_IF_ERROR(RewritePack(id, pack));
    }
  }
  report.set_live_chunks(dry_run ? index_.size() - dead.size() : index_.size());
  report.set_seconds(absl::ToDoubleSeconds(absl::Now() - start));
  log::Info("store.gc", {{"dry_run", dry_run},
                         {"live_chunks", report.live_chunks()},
                         {"dead_chunks", report.dead_chunks()},
                         {"reclaimed_bytes", report.reclaimed_bytes()},
                         {"packs_deleted", report.packs_deleted()},
                         {"packs_rewritten", report.packs_rewritten()}});
  return report;
}

absl::Status Store::Impl::DeletePack(uint32_t id, const std::shared_ptr<PackReader>& pack) {
  {
    absl::MutexLock l(&packs_mu_);
    packs_[id] = nullptr;  // readers holding the shared_ptr keep working
  }
  if (::unlink(pack->path().c_str()) != 0 && errno != ENOENT) {
    return ErrnoError(errno, absl::StrCat("unlink pack ", pack->path()));
  }
  return FsyncDir(DirName(pack->path()));
}

absl::Status Store::Impl::RewritePack(uint32_t id, const std::shared_ptr<PackReader>& pack) {
  KC_ASSIGN_OR_RETURN(std::unique_ptr<PackWriter> writer,
                      PackWriter::Create(packs_dir_, opts_.test_hook));
  std::string blob;
  for (const PackEntry& e : pack->entries()) {
    auto loc = index_.Lookup(e.digest);
    if (!loc || loc->pack_id != id || loc->offset != e.offset) continue;  // dead or elsewhere
    KC_RETURN_IF_ERROR(pack->ReadBlob(e.offset, e.stored_len, &blob));
    if (Xxh3(blob.data(), blob.size()) != e.xxh3) {
      // Never copy corruption into a fresh pack; leave this one for Verify.
      return absl::DataLossError(absl::StrCat("GC: chunk ", e.digest.ToHex(), " in pack ",
                                              pack->name(), " is corrupt; pack not rewritten"));
    }
    KC_RETURN_IF_ERROR(writer->Append(e.digest, e.codec, blob, e.raw_len, e.xxh3).status());
  }
  KC_RETURN_IF_ERROR(writer->Finish());
  KC_ASSIGN_OR_RETURN(std::unique_ptr<PackReader> reader,
                      PackReader::Open(writer->path(), writer->name()));
  const uint32_t new_id = AddPack(std::move(reader));
  for (const PackEntry& e : writer->entries()) {
    index_.ReplaceIfIn(e.digest, id,
                       ChunkLocation{new_id, e.stored_len, e.offset, e.raw_len, e.codec, e.xxh3});
  }
  log::Info("store.pack_rewritten",
            {{"old", pack->name()}, {"new", writer->name()}, {"chunks", writer->entries().size()}});
  return DeletePack(id, pack);
}

}  // namespace kerncap::store
