#include "format/store_reader.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <memory>
#include <system_error>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/errno_status.h"
#include "common/file_util.h"
#include "common/status_macros.h"
#include "format/chunk_read.h"
#include "format/codec.h"
#include "format/manifest_util.h"
#include "format/pack_format.h"
#include "format/pack_reader.h"

namespace kerncap::store {
namespace {

namespace fs = std::filesystem;

// How often OpenCapture lists packs/ again for chunks a concurrent GC moved.
constexpr int kLocateAttempts = 3;

// Published packs: packs/<xx>/<name>.pack, not tmp-* (being written) and not
// packs/quarantine/. Sorted by path. A missing packs/ is an empty list.
absl::StatusOr<std::vector<std::pair<std::string, std::string>>> ListPacks(
    const std::string& packs_dir) {
  std::vector<std::pair<std::string, std::string>> out;  // path, name
  std::error_code ec;
  fs::directory_iterator top(packs_dir, ec);
  if (ec == std::errc::no_such_file_or_directory) return out;
  if (ec) return ErrnoError(ec.value(), absl::StrCat("list ", packs_dir));
  for (; top != fs::directory_iterator(); top.increment(ec)) {
    if (ec) return ErrnoError(ec.value(), absl::StrCat("list ", packs_dir));
    std::error_code sub_ec;
    if (!top->is_directory(sub_ec) || top->path().filename() == "quarantine") continue;
    fs::directory_iterator files(top->path(), sub_ec);
    for (; !sub_ec && files != fs::directory_iterator(); files.increment(sub_ec)) {
      const std::string fname = files->path().filename().string();
      if (absl::StartsWith(fname, "tmp-") || !absl::EndsWith(fname, ".pack")) continue;
      std::error_code f_ec;
      if (!files->is_regular_file(f_ec)) continue;
      out.emplace_back(files->path().string(), fname.substr(0, fname.size() - 5));
    }
    if (sub_ec && sub_ec != std::errc::no_such_file_or_directory) {
      return ErrnoError(sub_ec.value(), absl::StrCat("list ", top->path().string()));
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

std::string FormatStoreConfig(const StoreConfig& config) {
  return absl::StrCat("format=", config.format, "\nchunk_size=", config.chunk_size, "\n");
}

absl::StatusOr<StoreConfig> ReadStoreConfig(const std::string& dir) {
  const std::string path = dir + "/STORE";
  KC_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  StoreConfig c;
  bool have_format = false, have_chunk = false;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipWhitespace())) {
    line = absl::StripAsciiWhitespace(line);
    if (absl::ConsumePrefix(&line, "format=")) {
      have_format = absl::SimpleAtoi(line, &c.format);
      if (!have_format) {
        return absl::FailedPreconditionError(
            absl::StrCat(path, ": format '", line, "' is not a number"));
      }
    } else if (absl::ConsumePrefix(&line, "chunk_size=")) {
      have_chunk = absl::SimpleAtoi(line, &c.chunk_size);
    } else {
      return absl::FailedPreconditionError(absl::StrCat(
          path, ": unexpected line '", absl::CHexEscape(line.substr(0, 64)),
          "'; not a kerncap STORE file this version understands"));
    }
  }
  if (!have_format || c.format != kStoreFormat) {
    return absl::FailedPreconditionError(absl::StrCat(
        path, ": store format ", have_format ? absl::StrCat(c.format) : std::string("(none)"),
        "; this kerncap understands format ", kStoreFormat,
        " (a newer kerncap made it, or it is not a kerncap store)"));
  }
  const uint32_t cs = c.chunk_size;
  if (!have_chunk || cs < (64u << 10) || cs > (4u << 20) || (cs & (cs - 1)) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, ": missing or invalid chunk_size (a power of two, 64 KiB..4 MiB)"));
  }
  return c;
}

void ForEachManifestChunk(const v1::CaptureManifest& m,
                          const std::function<void(const Digest&)>& fn) {
  // Digests that do not parse are skipped: every manifest read from the store
  // has passed format::ValidateManifest, which rejects them.
  (void)service::ForEachChunkList(
      m, [&](const v1::ChunkList& l, const v1::Region*, absl::string_view) {
        for (const std::string& raw : l.chunk_digests()) {
          if (raw.empty()) continue;
          auto d = Digest::FromBytes(raw);
          if (d.ok()) fn(*d);
        }
        return absl::OkStatus();
      });
}

// ---------------------------------------------------------------------------
// StoreCapture

StoreCapture::~StoreCapture() = default;

absl::Status StoreCapture::ReadChunkInto(const Digest& d, uint32_t raw_size, char* out) const {
  auto it = chunks_.find(d);
  if (it == chunks_.end()) {
    return absl::NotFoundError(absl::StrCat("chunk ", d.ToHex(), " is not referenced by capture ",
                                            capture_id()));
  }
  const Location& loc = it->second;
  auto what = [&] {
    return absl::StrCat("chunk ", d.ToHex(), " in pack ", loc.pack->name(), " at offset ",
                        loc.offset);
  };
  if (loc.raw_len != raw_size) {
    return absl::DataLossError(
        absl::StrCat(what(), ": holds ", loc.raw_len, " bytes, expected ", raw_size));
  }
  format::StoredChunkSpan span;
  span.offset = loc.offset;
  span.length = loc.stored_len;
  span.data_length = loc.stored_len;
  span.codec = loc.codec;
  span.xxh3 = loc.xxh3;
  return format::ReadVerifiedChunk(loc.pack->fd(), span, raw_size, out, what);
}

// ---------------------------------------------------------------------------
// StoreReader

absl::StatusOr<std::unique_ptr<StoreReader>> StoreReader::Open(const std::string& dir_in) {
  if (dir_in.empty()) return absl::InvalidArgumentError("store directory is empty");
  std::error_code ec;
  std::string dir = fs::absolute(dir_in, ec).lexically_normal().string();
  if (ec) dir = dir_in;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) {
    const int err = errno;
    if (err == ENOENT) {
      return absl::NotFoundError(absl::StrCat("store directory ", dir, " does not exist"));
    }
    return ErrnoError(err, absl::StrCat("store directory ", dir));
  }
  if (!S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat("store ", dir, " is not a directory"));
  }
  if (::access(dir.c_str(), R_OK | X_OK) != 0) {
    return ErrnoError(errno, absl::StrCat("store directory ", dir));
  }

  auto config = ReadStoreConfig(dir);
  if (!config.ok()) {
    if (absl::IsNotFound(config.status())) {
      return absl::FailedPreconditionError(
          absl::StrCat(dir, " is not a kerncap store (no STORE file)"));
    }
    return config.status();
  }
  const uint32_t chunk_size = config->chunk_size;
  std::unique_ptr<StoreReader> r(new StoreReader(dir, chunk_size));
  if (::stat(r->manifests_.refs_dir().c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat(dir, " is not a kerncap store (no refs/captures directory)"));
  }
  return r;
}

absl::StatusOr<std::vector<std::string>> StoreReader::ListCaptureIds() const {
  KC_ASSIGN_OR_RETURN(std::vector<std::string> ids, manifests_.ListRefs());
  std::sort(ids.begin(), ids.end());
  return ids;
}

absl::StatusOr<std::string> StoreReader::ResolveCaptureId(absl::string_view id_or_prefix) const {
  KC_ASSIGN_OR_RETURN(std::vector<std::string> ids, ListCaptureIds());
  return MatchCaptureIdPrefix(id_or_prefix,
                              std::lower_bound(ids.begin(), ids.end(), std::string(id_or_prefix)),
                              ids.end(), absl::StrCat(" in store ", dir_));
}

absl::StatusOr<v1::CaptureManifest> StoreReader::GetManifest(
    absl::string_view id_or_prefix) const {
  KC_ASSIGN_OR_RETURN(std::string id, ResolveCaptureId(id_or_prefix));
  return manifests_.ReadCaptureManifest(id);
}

absl::StatusOr<std::unique_ptr<StoreCapture>> StoreReader::OpenCapture(
    absl::string_view id_or_prefix) const {
  std::unique_ptr<StoreCapture> cap(new StoreCapture());
  KC_ASSIGN_OR_RETURN(cap->manifest_, GetManifest(id_or_prefix));
  absl::flat_hash_set<Digest> missing;
  ForEachManifestChunk(cap->manifest_, [&](const Digest& d) { missing.insert(d); });

  // Open packs until every chunk is located; keep those that hold one.
  const std::string packs_dir = dir_ + "/packs";
  absl::flat_hash_set<std::string> seen;  // pack names already looked at
  std::vector<std::string> damaged;
  for (int attempt = 0; attempt < kLocateAttempts && !missing.empty(); ++attempt) {
    KC_ASSIGN_OR_RETURN(auto packs, ListPacks(packs_dir));
    for (const auto& [path, name] : packs) {
      if (missing.empty()) break;
      if (!seen.insert(name).second) continue;
      auto reader = PackReader::Open(path, name);
      if (!reader.ok()) {
        // Unlinked by GC since the listing: its chunks are in a newer pack.
        if (absl::IsNotFound(reader.status())) continue;
        if (absl::IsPermissionDenied(reader.status())) return reader.status();
        // A damaged trailer (the daemon quarantines such packs at its next
        // start); its chunks may have copies elsewhere.
        damaged.push_back(std::string(reader.status().message()));
        continue;
      }
      std::unique_ptr<PackReader> pack = std::move(*reader);
      bool used = false;
      for (const PackEntry& e : pack->entries()) {
        if (missing.erase(e.digest) == 0) continue;
        cap->chunks_.emplace(e.digest, StoreCapture::Location{pack.get(), e.offset, e.stored_len,
                                                              e.raw_len, e.codec, e.xxh3});
        used = true;
      }
      if (used) {
        pack->ReleaseEntries();
        cap->packs_.push_back(std::move(pack));
      }
    }
  }
  if (!missing.empty()) {
    const std::string id = cap->manifest_.capture_id();
    if (absl::IsNotFound(manifests_.ReadRef(id).status())) {
      return absl::NotFoundError(absl::StrCat("capture ", id, " was deleted from store ", dir_,
                                              " while it was being opened"));
    }
    std::string msg = absl::StrCat("capture ", id, ": chunk ", missing.begin()->ToHex(),
                                   " is in no readable pack of store ", dir_);
    if (missing.size() > 1) absl::StrAppend(&msg, " (and ", missing.size() - 1, " more)");
    if (!damaged.empty()) {
      absl::StrAppend(&msg, "; damaged packs: ", absl::StrJoin(damaged, "; "));
    }
    absl::StrAppend(&msg, "; if kerncapd was collecting garbage, run the command again");
    return absl::DataLossError(msg);
  }
  return cap;
}

}  // namespace kerncap::store
