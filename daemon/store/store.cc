#include "daemon/store/store.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "common/errno_status.h"
#include "common/file_util.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "daemon/store/ingest.h"
#include "format/chunk_read.h"
#include "format/manifest_check.h"
#include "daemon/store/store_impl.h"

namespace kerncap::store {
namespace {

namespace fs = std::filesystem;

constexpr uint32_t kMinChunk = 64u << 10;
constexpr uint32_t kMaxChunk = 4u << 20;

// Removes tmp-* files anywhere under `root`: leftovers of writes a crash
// interrupted (they were never renamed, so nothing refers to them).
int RemoveTempFiles(const std::string& root) {
  int removed = 0;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(root, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (it->is_regular_file(ec) && absl::StartsWith(it->path().filename().string(), "tmp-")) {
      std::error_code rm_ec;
      if (fs::remove(it->path(), rm_ec)) ++removed;
    }
  }
  return removed;
}

std::string Hex(const Digest& d) { return d.ToHex(); }

int WorkerCount(const StoreOptions& o) {
  return o.workers > 0 ? o.workers
                       : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

}  // namespace

// ---------------------------------------------------------------------------
// Impl: open / close.

Store::Impl::Impl(StoreOptions options)
    : opts_(std::move(options)),
      packs_dir_(opts_.dir + "/packs"),
      manifests_(opts_.dir),
      catalog_path_(opts_.dir + "/catalog.sqlite"),
      appender_(std::make_unique<StripedAppender>(
          opts_.append_stripes > 0 ? opts_.append_stripes
                                   : StripedAppender::DefaultStripes(WorkerCount(opts_)),
          packs_dir_, opts_.pack_target_bytes, opts_.test_hook,
          [this](std::unique_ptr<PackReader> reader, const std::vector<PackEntry>& entries) {
            PublishPack(std::move(reader), entries);
          })),
      pipeline_(std::make_unique<ChunkPipeline>(
          opts_.max_inflight_bytes, opts_.zstd_level,
          [this](const ChunkTask& t, ChunkCompressor& c, std::string& scratch,
                 std::string& private_copy) { ProcessChunk(t, c, scratch, private_copy); })) {}

Store::Impl::~Impl() {
  refs_stop_ = true;
  if (refs_builder_.joinable()) refs_builder_.join();
  pipeline_->Stop();
  // Only chunks of uncommitted ingests can be in the open pack (Commit
  // seals what it needs), so it is dropped, not published. Packs already
  // queued for sealing are finished by the sealer before it stops.
  appender_->Stop();
  if (lock_fd_ >= 0) ::close(lock_fd_);
}

absl::Status Store::Impl::Open() {
  const uint32_t cs = opts_.chunk_size;
  if (cs < kMinChunk || cs > kMaxChunk || (cs & (cs - 1)) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("chunk_size ", cs, " must be a power of two between 64 KiB and 4 MiB"));
  }
  if (opts_.dir.empty()) return absl::InvalidArgumentError("store directory is empty");
  if (opts_.pack_target_bytes == 0) opts_.pack_target_bytes = 1;
  KC_RETURN_IF_ERROR(MakeDirs(opts_.dir, kStoreDirMode));
  {
    // Private whatever the umask or the mode an older kerncapd left: with
    // the top directory closed to others, nothing below is reachable.
    struct stat st;
    if (::stat(opts_.dir.c_str(), &st) == 0 && (st.st_mode & 07027) != 0 &&
        ::chmod(opts_.dir.c_str(), st.st_mode & 0750) != 0) {
      return ErrnoError(errno, absl::StrCat("chmod ", opts_.dir));
    }
  }
  {
    std::error_code ec;
    abs_dir_ = fs::absolute(opts_.dir, ec).lexically_normal().string();
    if (ec) abs_dir_ = opts_.dir;
    while (abs_dir_.size() > 1 && abs_dir_.back() == '/') abs_dir_.pop_back();
  }

  // One daemon per store: flock on LOCK, which also records the holder's pid.
  const std::string lock_path = opts_.dir + "/LOCK";
  lock_fd_ = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, kStoreFileMode);
  if (lock_fd_ < 0) return ErrnoError(errno, absl::StrCat("open ", lock_path));
  if (::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    std::string holder = "unknown";
    if (auto content = ReadFile(lock_path); content.ok()) {
      holder = std::string(absl::StripAsciiWhitespace(*content));
    }
    ::close(lock_fd_);
    lock_fd_ = -1;
    if (err == EWOULDBLOCK) {
      // Unavailable: the one "busy" answer (kerncapd exits 2 for it only).
      return absl::UnavailableError(
          absl::StrCat("store ", opts_.dir, " is locked by another kerncapd (pid ", holder,
                       "); only one daemon may own a store"));
    }
    return ErrnoError(err, absl::StrCat("flock ", lock_path));
  }
  const std::string pid = absl::StrCat(::getpid(), "\n");
  if (::ftruncate(lock_fd_, 0) != 0 || ::pwrite(lock_fd_, pid.data(), pid.size(), 0) < 0) {
    return ErrnoError(errno, absl::StrCat("write ", lock_path));
  }

  const int removed = RemoveTempFiles(opts_.dir);

  // The chunk size is a property of the store: digests depend on it.
  const std::string config_path = opts_.dir + "/STORE";
  auto config = ReadStoreConfig(opts_.dir);
  if (config.ok()) {
    if (config->chunk_size != cs) {
      return absl::FailedPreconditionError(absl::StrCat(
          "store ", opts_.dir, " was created with chunk_size ", config->chunk_size, ", not ", cs,
          " (start kerncapd with --chunk-size=", config->chunk_size, " for this store)"));
    }
  } else if (absl::IsNotFound(config.status())) {
    KC_RETURN_IF_ERROR(WriteFileAtomic(config_path, FormatStoreConfig({kStoreFormat, cs}),
                                       kStoreFileMode));
  } else {
    return config.status();
  }

  // Load every published pack's trailer into the index; quarantine packs
  // whose trailer is missing or damaged (never read them).
  KC_RETURN_IF_ERROR(MakeDirs(packs_dir_, kStoreDirMode));
  std::vector<std::pair<std::string, std::string>> pack_files;  // path, name
  std::error_code ec;
  for (const auto& sub : fs::directory_iterator(packs_dir_, ec)) {
    if (!sub.is_directory() || sub.path().filename() == "quarantine") continue;
    for (const auto& f : fs::directory_iterator(sub.path(), ec)) {
      const std::string fname = f.path().filename().string();
      if (!f.is_regular_file() || !absl::EndsWith(fname, ".pack")) continue;
      pack_files.emplace_back(f.path().string(), fname.substr(0, fname.size() - 5));
    }
  }
  std::sort(pack_files.begin(), pack_files.end());
  uint64_t chunks = 0;
  for (const auto& [path, name] : pack_files) {
    auto reader = PackReader::Open(path, name);
    if (!reader.ok()) {
      const std::string qdir = packs_dir_ + "/quarantine";
      KC_RETURN_IF_ERROR(MakeDirs(qdir, kStoreDirMode));
      const std::string qpath = absl::StrCat(qdir, "/", name, ".pack");
      if (::rename(path.c_str(), qpath.c_str()) != 0) {
        return ErrnoError(errno, absl::StrCat("quarantine ", path));
      }
      log::Warn("store.pack_quarantined",
                {{"pack", name}, {"error", std::string(reader.status().message())}});
      absl::MutexLock l(&packs_mu_);
      quarantined_.push_back(absl::StrCat(name, ": ", reader.status().message()));
      continue;
    }
    std::shared_ptr<PackReader> pack = std::move(*reader);
    const uint32_t id = AddPack(pack);
    for (const PackEntry& e : pack->entries()) {
      index_.InsertIfAbsent(e.digest,
                            ChunkLocation{id, e.stored_len, e.offset, e.raw_len, e.codec, e.xxh3});
      ++chunks;
    }
  }

  KC_RETURN_IF_ERROR(manifests_.Init());
  KC_ASSIGN_OR_RETURN(std::vector<std::string> refs, manifests_.ListRefs());
  {
    absl::MutexLock l(&ids_mu_);
    ids_.insert(refs.begin(), refs.end());
  }
  const int orphans = RemoveOrphanManifests(refs);

  // Catalog: derived from refs; rebuilt when missing, damaged or stale.
  auto catalog = Catalog::Open(catalog_path_);
  if (!catalog.ok()) {
    log::Warn("store.catalog_rebuild", {{"reason", std::string(catalog.status().message())}});
    Catalog::Remove(catalog_path_);
    catalog = Catalog::Open(catalog_path_);
    if (!catalog.ok()) return catalog.status();
  }
  catalog_ = std::move(*catalog);
  absl::StatusOr<int> reconciled = ReconcileCatalog(refs);
  if (!reconciled.ok()) {
    // Damage quick_check did not see (a page read only by the full scan).
    log::Warn("store.catalog_rebuild", {{"reason", std::string(reconciled.status().message())}});
    catalog_.reset();
    Catalog::Remove(catalog_path_);
    KC_ASSIGN_OR_RETURN(catalog_, Catalog::Open(catalog_path_));
    reconciled = ReconcileCatalog(refs);
  }
  KC_ASSIGN_OR_RETURN(const int unlisted, reconciled);

  const int n = WorkerCount(opts_);
  pipeline_->Start(n);
  appender_->Start();
  refs_builder_ = std::thread([this] { RefCountBuilder(); });
  log::Info("store.opened", {{"dir", opts_.dir},
                             {"packs", pack_files.size()},
                             {"chunks", chunks},
                             {"captures", refs.size()},
                             {"tmp_removed", removed},
                             {"orphan_manifests_removed", orphans},
                             {"unlisted_captures", unlisted},
                             {"workers", n},
                             {"append_stripes", appender_->stripes()}});
  return absl::OkStatus();
}

// The catalog is derived from the refs and manifests; any row that disagrees
// with them (a capture missing, one the refs do not have, another manifest
// digest, a lost child row or an unreadable summary) is re-derived, and the
// log says what was wrong, so the capture list never changes silently.
// Returns how many captures cannot be listed (their manifest is unreadable;
// each is logged by id).
absl::StatusOr<int> Store::Impl::ReconcileCatalog(const std::vector<std::string>& refs) {
  KC_ASSIGN_OR_RETURN(std::vector<Catalog::Row> rows, catalog_->Rows());
  std::map<std::string, Catalog::Row> in_catalog;
  for (Catalog::Row& r : rows) in_catalog.emplace(r.id, std::move(r));
  const std::set<std::string> in_refs(refs.begin(), refs.end());
  std::vector<std::string> stale, missing, disagreeing;
  for (const auto& [id, row] : in_catalog) {
    if (in_refs.contains(id)) continue;
    KC_RETURN_IF_ERROR(catalog_->Delete(id));
    stale.push_back(id);
  }
  int unlisted = 0;
  for (const std::string& id : in_refs) {
    auto hex = manifests_.ReadRef(id);
    auto it = in_catalog.find(id);
    const bool present = it != in_catalog.end();
    if (present && it->second.complete && hex.ok() && it->second.manifest_digest == *hex) {
      continue;
    }
    auto m = hex.ok() ? manifests_.ReadManifest(*hex) : hex.status();
    if (!m.ok()) {
      if (present) KC_RETURN_IF_ERROR(catalog_->Delete(id));
      log::Error("store.manifest_unreadable",
                 {{"capture", id},
                  {"error", std::string(m.status().message())},
                  {"note", "the capture is kept but not listed; kerncapctl verify names it"}});
      ++unlisted;
      continue;
    }
    KC_RETURN_IF_ERROR(catalog_->Upsert(*m, *hex));
    (present ? disagreeing : missing).push_back(id);
  }
  if (!stale.empty() || !missing.empty() || !disagreeing.empty()) {
    auto first = [](const std::vector<std::string>& ids) {
      return std::vector<std::string>(ids.begin(), ids.begin() + std::min<size_t>(ids.size(), 8));
    };
    log::Warn(
        "store.catalog_repaired",
        {{"reason", in_catalog.empty()
                        ? "the catalog was empty or new (rebuilt, or its file was removed): "
                          "every capture derived from the refs"
                        : "the catalog disagreed with the refs and manifests (their copy is "
                          "the truth): rows re-derived"},
         {"missing", missing.size()},
         {"not_in_refs", stale.size()},
         {"disagreeing", disagreeing.size()},
         {"missing_ids", first(missing)},
         {"not_in_refs_ids", first(stale)},
         {"disagreeing_ids", first(disagreeing)}});
  }
  return unlisted;
}

int Store::Impl::RemoveOrphanManifests(const std::vector<std::string>& refs) {
  // Only safe while no commit is in flight (a commit writes its manifest
  // before its ref), which is the case during Open.
  std::set<std::string> live;
  for (const std::string& id : refs) {
    if (auto hex = manifests_.ReadRef(id); hex.ok()) live.insert(*hex);
  }
  const std::set<std::string> ref_ids(refs.begin(), refs.end());
  int removed = 0;
  std::error_code ec;
  for (const auto& sub : fs::directory_iterator(manifests_.manifests_dir(), ec)) {
    if (!sub.is_directory()) continue;
    for (const auto& f : fs::directory_iterator(sub.path(), ec)) {
      const std::string name = f.path().filename().string();
      if (name.size() != 64 || live.contains(name)) continue;
      // No ref names it. If its capture still has a ref (a damaged one, or
      // one naming another capture's manifest), the manifest is that
      // capture's only copy: keep it and point the ref back at it.
      auto m = manifests_.ReadManifest(name);
      if (m.ok() && ref_ids.contains(m->capture_id())) {
        // Repaired only when the ref leads to no manifest of its own
        // capture (a readable one that fails validation is reported, not
        // replaced).
        const std::string& id = m->capture_id();
        auto hex = manifests_.ReadRef(id);
        auto current = hex.ok() ? manifests_.ReadManifest(*hex) : hex.status();
        std::string why;
        if (!current.ok()) {
          why = std::string(current.status().message());
        } else if (current->capture_id() != id) {
          why = absl::StrCat("the ref named capture ", current->capture_id(), "'s manifest");
        }
        if (!why.empty()) {
          absl::Status repaired = manifests_.WriteRef(id, name);
          log::Warn("store.ref_repaired",
                    {{"capture", id},
                     {"manifest", name},
                     {"was", why},
                     {"error", repaired.ok() ? std::string() : repaired.ToString()}});
          if (repaired.ok()) live.insert(name);
          continue;
        }
        // Its capture has a good ref to another manifest: a stale copy.
      }
      std::error_code rm_ec;
      if (fs::remove(f.path(), rm_ec)) ++removed;
    }
  }
  return removed;
}

void Store::Impl::CountCaptureLocked(const std::string& id, const v1::CaptureManifest& m,
                                     int delta) {
  if (delta > 0 ? !refs_counted_.insert(id).second : refs_counted_.erase(id) == 0) return;
  absl::flat_hash_set<Digest> mine;
  ForEachManifestChunk(m, [&](const Digest& d) {
    if (!mine.insert(d).second) return;
    if (delta > 0) {
      ++refcount_[d];
    } else if (auto it = refcount_.find(d); it != refcount_.end() && --it->second == 0) {
      refcount_.erase(it);
    }
  });
}

void Store::Impl::RefCountBuilder() {
  std::vector<std::string> ids;
  {
    absl::MutexLock l(&ids_mu_);
    ids.assign(ids_.begin(), ids_.end());
  }
  for (const std::string& id : ids) {
    if (refs_stop_) return;
    auto m = LoadManifest(id);
    if (!m.ok()) continue;  // deleted meanwhile, or damaged (Verify reports it)
    absl::MutexLock l(&refs_mu_);
    bool exists;
    {
      absl::MutexLock i(&ids_mu_);
      exists = ids_.contains(id);
    }
    // A capture deleted after it was listed is not counted; one committed
    // meanwhile was counted by its publish.
    if (exists) CountCaptureLocked(id, *m, +1);
  }
  absl::MutexLock l(&refs_mu_);
  refs_ready_ = true;
}

uint32_t Store::Impl::AddPack(std::shared_ptr<PackReader> pack) {
  absl::MutexLock l(&packs_mu_);
  packs_.push_back(std::move(pack));
  return static_cast<uint32_t>(packs_.size() - 1);
}

std::shared_ptr<PackReader> Store::Impl::GetPack(uint32_t id) {
  absl::MutexLock l(&packs_mu_);
  return id < packs_.size() ? packs_[id] : nullptr;
}

// ---------------------------------------------------------------------------
// Impl: reads.

absl::Status Store::Impl::Missing(const Digest& d) {
  absl::MutexLock l(&packs_mu_);
  if (!quarantined_.empty()) {
    // Its pack may be one whose trailer was damaged: lost, not absent.
    return absl::DataLossError(absl::StrCat(
        "chunk ", Hex(d), " is missing: it is in no readable pack; ", quarantined_.size(),
        " damaged pack(s) are quarantined in packs/quarantine (", quarantined_.front(),
        ") and it may be in one of them"));
  }
  return absl::NotFoundError(absl::StrCat("chunk ", Hex(d), " not found in store"));
}

absl::StatusOr<StoredChunk> Store::Impl::ReadStored(const Digest& d, std::string* pack_name) {
  // A GC may move the chunk between the lookup and the read; retry then.
  for (int attempt = 0; attempt < 3; ++attempt) {
    auto loc = index_.Lookup(d);
    if (!loc) return Missing(d);
    std::shared_ptr<PackReader> pack = GetPack(loc->pack_id);
    if (!pack) continue;
    if (pack_name != nullptr) *pack_name = pack->name();
    StoredChunk out;
    absl::Status st = pack->ReadBlob(loc->offset, loc->stored_len, &out.data);
    if (!st.ok()) {
      return absl::DataLossError(
          absl::StrCat("chunk ", Hex(d), " in pack ", pack->name(), ": ", st.message()));
    }
    if (Xxh3(out.data.data(), out.data.size()) != loc->xxh3) {
      return absl::DataLossError(absl::StrCat("chunk ", Hex(d), " in pack ", pack->name(),
                                              " at offset ", loc->offset,
                                              ": checksum mismatch (stored bytes are corrupt)"));
    }
    out.codec = static_cast<v1::ChunkCodec>(loc->codec);
    out.raw_size = loc->raw_len;
    return out;
  }
  return absl::UnavailableError(absl::StrCat("chunk ", Hex(d), " kept moving during GC"));
}

absl::Status Store::Impl::ReadChunkInto(const Digest& d, char* out, uint32_t expected_raw) {
  // A GC may move the chunk between the lookup and the read; retry then.
  for (int attempt = 0; attempt < 3; ++attempt) {
    auto loc = index_.Lookup(d);
    if (!loc) return Missing(d);
    // Held: a pack GC unlinks meanwhile stays readable through its fd.
    std::shared_ptr<PackReader> pack = GetPack(loc->pack_id);
    if (!pack) continue;
    auto what = [&] {
      return absl::StrCat("chunk ", Hex(d), " in pack ", pack->name(), " at offset ", loc->offset);
    };
    if (loc->raw_len != expected_raw) {
      return absl::DataLossError(
          absl::StrCat(what(), ": holds ", loc->raw_len, " bytes, expected ", expected_raw));
    }
    format::StoredChunkSpan span;
    span.offset = loc->offset;
    span.length = loc->stored_len;
    span.data_length = loc->stored_len;
    span.codec = loc->codec;
    span.xxh3 = loc->xxh3;
    return format::ReadVerifiedChunk(pack->fd(), span, expected_raw, out, what);
  }
  return absl::UnavailableError(absl::StrCat("chunk ", Hex(d), " kept moving during GC"));
}

// ---------------------------------------------------------------------------
// Impl: captures.

absl::StatusOr<std::string> Store::Impl::Resolve(absl::string_view id_or_prefix) {
  absl::MutexLock l(&ids_mu_);
  return MatchCaptureIdPrefix(id_or_prefix, ids_.lower_bound(std::string(id_or_prefix)),
                              ids_.end());
}

absl::StatusOr<v1::CaptureManifest> Store::Impl::LoadManifest(const std::string& id) {
  Hook("manifest.read");
  return manifests_.ReadCaptureManifest(id);
}

absl::StatusOr<std::string> Store::Impl::PublishManifest(v1::CaptureManifest manifest) {
  std::string id = manifest.capture_id();
  {
    absl::MutexLock l(&ids_mu_);
    if (id.empty()) {
      do {
        id = NewCaptureId();
      } while (ids_.contains(id) || reserved_ids_.contains(id));
    } else if (!IsValidCaptureId(id)) {
      return absl::InvalidArgumentError(
          absl::StrCat("malformed capture id '", id, "': expected cap-<12 hex digits>"));
    } else if (ids_.contains(id) || reserved_ids_.contains(id)) {
      return absl::AlreadyExistsError(absl::StrCat("capture ", id, " already exists"));
    }
    reserved_ids_.insert(id);
  }
  manifest.set_capture_id(id);
  if (manifest.format_version() == 0) manifest.set_format_version(1);
  if (manifest.created_unix_ms() == 0)
    manifest.set_created_unix_ms(absl::ToUnixMillis(absl::Now()));

  auto write = [&]() -> absl::StatusOr<std::string> {
    Hook("commit.before_manifest");
    KC_ASSIGN_OR_RETURN(std::string hex, manifests_.WriteManifest(manifest));
    Hook("commit.before_ref");
    KC_RETURN_IF_ERROR(manifests_.WriteRef(id, hex));
    Hook("commit.ref_written");
    return hex;
  };
  auto hex = write();
  {
    absl::MutexLock l(&ids_mu_);
    reserved_ids_.erase(id);
    if (hex.ok()) ids_.insert(id);
  }
  if (!hex.ok()) return hex.status();
  {
    absl::MutexLock l(&refs_mu_);
    CountCaptureLocked(id, manifest, +1);
  }
  // The capture is durable and visible now; a catalog failure only makes the
  // catalog stale, and the next Open repairs it from the refs.
  if (absl::Status st = catalog_->Upsert(manifest, *hex); !st.ok()) {
    log::Error("store.catalog_insert_failed", {{"capture", id}, {"error", st.ToString()}});
  }
  const auto& s = manifest.stats();
  log::Info("capture.committed", {{"capture", id},
                                  {"manifest", *hex},
                                  {"logical_bytes", s.logical_bytes()},
                                  {"new_stored_bytes", s.new_stored_bytes()},
                                  {"dedup_bytes", s.dedup_bytes()},
                                  {"seconds", s.ingest_seconds()}});
  return id;
}

// ---------------------------------------------------------------------------
// Store facade.

Store::Store(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Store::~Store() = default;

absl::StatusOr<std::unique_ptr<Store>> Store::Open(const StoreOptions& options) {
  auto impl = std::make_unique<Impl>(options);
  KC_RETURN_IF_ERROR(impl->Open());
  return std::unique_ptr<Store>(new Store(std::move(impl)));
}

absl::StatusOr<std::unique_ptr<CaptureIngest>> Store::BeginCapture() {
  return std::unique_ptr<CaptureIngest>(new IngestImpl(impl_.get()));
}

absl::StatusOr<std::string> Store::ResolveCaptureId(absl::string_view id_or_prefix) {
  return impl_->Resolve(id_or_prefix);
}

absl::StatusOr<v1::CaptureManifest> Store::GetManifest(absl::string_view id_or_prefix) {
  KC_ASSIGN_OR_RETURN(std::string id, impl_->Resolve(id_or_prefix));
  return impl_->LoadManifest(id);
}

absl::StatusOr<std::vector<v1::CaptureSummary>> Store::ListCaptures(
    const v1::ListCapturesRequest& filter, std::optional<uint32_t> owner_uid) {
  return impl_->catalog_->List(filter, owner_uid);
}

absl::Status Store::DeleteCapture(absl::string_view id_or_prefix) {
  KC_ASSIGN_OR_RETURN(std::string id, impl_->Resolve(id_or_prefix));
  KC_ASSIGN_OR_RETURN(std::string hex, impl_->manifests_.ReadRef(id));
  // The manifest goes with the ref only when it is this capture's: a damaged
  // ref may name another capture's manifest, which must survive.
  auto manifest = impl_->manifests_.ReadManifest(hex);
  const bool own_manifest = manifest.ok() && manifest->capture_id() == id;
  KC_RETURN_IF_ERROR(impl_->manifests_.DeleteRef(id));
  {
    absl::MutexLock l(&impl_->ids_mu_);
    impl_->ids_.erase(id);
  }
  if (own_manifest) {
    absl::MutexLock l(&impl_->refs_mu_);
    impl_->CountCaptureLocked(id, *manifest, -1);
  }
  if (absl::Status st = impl_->catalog_->Delete(id); !st.ok()) {
    log::Error("store.catalog_delete_failed", {{"capture", id}, {"error", st.ToString()}});
  }
  if (own_manifest) {
    KC_RETURN_IF_ERROR(impl_->manifests_.DeleteManifest(hex));
  } else {
    log::Warn("capture.deleted_damaged_ref",
              {{"capture", id},
               {"manifest", hex},
               {"kept_because", manifest.ok() ? "it is capture " + manifest->capture_id() + "'s"
                                              : std::string(manifest.status().message())}});
  }
  // "capture.deleted" is the control service's line (with the peer that asked).
  return absl::OkStatus();
}

absl::StatusOr<Store::Footprint> Store::CaptureFootprint(absl::string_view id_in) {
  KC_ASSIGN_OR_RETURN(std::string id, impl_->Resolve(id_in));
  KC_ASSIGN_OR_RETURN(v1::CaptureManifest mine, impl_->LoadManifest(id));
  absl::flat_hash_set<Digest> own;
  ForEachManifestChunk(mine, [&](const Digest& d) { own.insert(d); });
  Footprint f;
  absl::MutexLock l(&impl_->refs_mu_);
  // Right after Open the counts may still be being built: worth a short wait.
  impl_->refs_mu_.AwaitWithTimeout(absl::Condition(&impl_->refs_ready_), absl::Seconds(2));
  f.exclusive_known = impl_->refs_ready_ && impl_->refs_counted_.contains(id);
  for (const Digest& d : own) {
    auto loc = impl_->index_.Lookup(d);
    if (!loc) continue;
    f.stored_bytes += loc->stored_len;
    if (!f.exclusive_known) continue;
    auto it = impl_->refcount_.find(d);
    if (it == impl_->refcount_.end() || it->second <= 1) f.exclusive_raw_bytes += loc->raw_len;
  }
  return f;
}

bool Store::HasChunk(const Digest& digest) { return impl_->index_.Contains(digest); }

absl::StatusOr<std::string> Store::ReadChunk(const Digest& digest) {
  std::string pack;
  KC_ASSIGN_OR_RETURN(StoredChunk c, impl_->ReadStored(digest, &pack));
  std::string out(c.raw_size, '\0');
  KC_RETURN_IF_ERROR(DecodeChunk(static_cast<uint8_t>(c.codec), c.data, c.raw_size, out.data(),
                                 absl::StrCat("chunk ", Hex(digest), " in pack ", pack)));
  return out;
}

absl::StatusOr<StoredChunk> Store::ReadStoredChunk(const Digest& digest) {
  return impl_->ReadStored(digest, nullptr);
}

absl::Status Store::PutStoredChunk(const Digest& digest, const StoredChunk& chunk) {
  if (impl_->index_.Contains(digest)) return absl::OkStatus();
  if (chunk.codec != v1::CODEC_RAW && chunk.codec != v1::CODEC_ZSTD) {
    return absl::InvalidArgumentError(
        absl::StrCat("chunk ", Hex(digest), ": unknown codec ", static_cast<int>(chunk.codec)));
  }
  if (chunk.raw_size == 0 || chunk.raw_size > kMaxChunk) {
    return absl::InvalidArgumentError(
        absl::StrCat("chunk ", Hex(digest), ": raw size ", chunk.raw_size, " out of range"));
  }
  std::string raw(chunk.raw_size, '\0');
  const std::string what = absl::StrCat("chunk ", Hex(digest));
  KC_RETURN_IF_ERROR(
      DecodeChunk(static_cast<uint8_t>(chunk.codec), chunk.data, chunk.raw_size, raw.data(), what));
  const Digest actual = Sha256(raw);
  if (actual != digest) {
    return absl::DataLossError(
        absl::StrCat(what, ": content does not match its digest (got ", Hex(actual), ")"));
  }
  impl_->pins_.Note(nullptr, digest);
  DigestClaims::Claim claim(impl_->claims_, digest);
  uint64_t seq;
  if (impl_->FindStored(digest, &seq)) return absl::OkStatus();
  return impl_->appender_
      ->Append(digest, static_cast<uint8_t>(chunk.codec), chunk.data, chunk.raw_size,
               Xxh3(chunk.data.data(), chunk.data.size()))
      .status();
}

absl::Status Store::ReadChunkList(const v1::ChunkList& list, void* out, size_t out_size) {
  if (list.chunk_size() == 0 && list.size() > 0) {
    return absl::InvalidArgumentError("chunk list has chunk_size 0");
  }
  if (out_size < list.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("output buffer of ", out_size, " bytes is smaller than ", list.size()));
  }
  const uint64_t cs = list.chunk_size();
  const uint64_t n = list.size() == 0 ? 0 : (list.size() + cs - 1) / cs;
  if (static_cast<uint64_t>(list.chunk_digests_size()) != n) {
    return absl::InvalidArgumentError(absl::StrCat("chunk list of ", list.size(), " bytes has ",
                                                   list.chunk_digests_size(), " digests, expected ",
                                                   n, " (diff lists must be expanded first)"));
  }
  char* base = static_cast<char*>(out);
  auto read_range = [&](uint64_t begin, uint64_t step) -> absl::Status {
    for (uint64_t i = begin; i < n; i += step) {
      const uint64_t off = i * cs;
      const uint32_t len = static_cast<uint32_t>(std::min<uint64_t>(cs, list.size() - off));
      const std::string& raw = list.chunk_digests(static_cast<int>(i));
      if (raw.empty()) {
        std::memset(base + off, 0, len);
        continue;
      }
      KC_ASSIGN_OR_RETURN(Digest d, Digest::FromBytes(raw));
      absl::Status st = impl_->ReadChunkInto(d, base + off, len);
      if (absl::IsNotFound(st)) {
        return absl::DataLossError(absl::StrCat("chunk ", Hex(d), " (chunk ", i,
                                                " of the list) is missing from the store"));
      }
      KC_RETURN_IF_ERROR(st);
    }
    return absl::OkStatus();
  };
  // Decoding is CPU-bound: use a second thread for large lists.
  if (n < 16) return read_range(0, 1);
  absl::Status other;
  std::thread helper([&] { other = read_range(1, 2); });
  absl::Status mine = read_range(0, 2);
  helper.join();
  KC_RETURN_IF_ERROR(mine);
  return other;
}

absl::StatusOr<std::string> Store::CommitImportedManifest(v1::CaptureManifest manifest) {
  // Nothing is published that a reader could not read safely.
  KC_RETURN_IF_ERROR(format::ValidateManifest(manifest));
  // Pin first (a concurrent GC keeps them), then make everything pending
  // durable, then require every chunk to be indexed.
  std::vector<Digest> digests;
  ForEachManifestChunk(manifest, [&](const Digest& d) { digests.push_back(d); });
  // Registered like an ingest for the duration of the commit, so a GC that
  // starts before the ref is written still sees these chunks as live.
  const int token = 0;
  impl_->pins_.Register(&token);
  struct Unregister {
    Store::Impl* impl;
    const void* token;
    ~Unregister() { impl->pins_.Unregister(token); }
  } unregister{impl_.get(), &token};
  for (const Digest& d : digests) impl_->pins_.Note(&token, d);
  // Every pack holding one of its chunks must be durable first: the open
  // one, and full ones the sealer thread may still be writing.
  std::set<uint64_t> packs;
  for (const Digest& d : digests) {
    uint64_t seq = 0;
    if (impl_->FindStored(d, &seq) && seq > 0) packs.insert(seq);
  }
  for (uint64_t seq : packs) KC_RETURN_IF_ERROR(impl_->appender_->EnsureDurable(seq));
  for (const Digest& d : digests) {
    if (!impl_->index_.Contains(d)) {
      return absl::FailedPreconditionError(
          absl::StrCat("imported capture references chunk ", Hex(d), " which is not in the store"));
    }
  }
  return impl_->PublishManifest(std::move(manifest));
}

Store::ImportPin::~ImportPin() { impl_->pins_.Unregister(this); }

std::unique_ptr<Store::ImportPin> Store::PinForImport(const v1::CaptureManifest& manifest) {
  std::unique_ptr<ImportPin> pin(new ImportPin(impl_.get()));
  impl_->pins_.Register(pin.get());
  ForEachManifestChunk(manifest, [&](const Digest& d) { impl_->pins_.Note(pin.get(), d); });
  return pin;
}

absl::StatusOr<v1::GcReport> Store::RunGc(bool dry_run) { return impl_->RunGc(dry_run); }

absl::Status Store::Verify(absl::string_view capture_id, bool rehash,
                           const std::function<void(const v1::VerifyProgress&)>& progress) {
  return impl_->Verify(capture_id, rehash, progress);
}

v1::StoreStats Store::Stats() {
  v1::StoreStats s;
  // Absolute: kerncap-replay on this host opens the store read-only by it.
  s.set_path(impl_->abs_dir_);
  {
    absl::MutexLock l(&impl_->ids_mu_);
    s.set_captures(impl_->ids_.size());
  }
  uint64_t raw = 0, chunks = 0;
  impl_->index_.ForEach([&](const Digest&, const ChunkLocation& loc) {
    raw += loc.raw_len;
    ++chunks;
  });
  s.set_unique_chunks(chunks);
  s.set_raw_bytes(raw);
  uint64_t stored = 0, packs = 0;
  {
    absl::MutexLock l(&impl_->packs_mu_);
    for (const auto& p : impl_->packs_) {
      if (!p) continue;
      stored += p->file_size();
      ++packs;
    }
  }
  s.set_stored_bytes(stored);
  s.set_pack_files(packs);
  if (auto logical = impl_->catalog_->TotalLogicalBytes(); logical.ok()) {
    s.set_logical_bytes(*logical);
  }
  s.set_chunk_size(impl_->opts_.chunk_size);
  return s;
}

uint32_t Store::chunk_size() const { return impl_->opts_.chunk_size; }

int Store::ingests_in_flight() const { return impl_->pins_.owners(); }

}  // namespace kerncap::store
