// catalog.h: the SQLite query index over committed captures. It is derived
// data: refs + manifests are the truth, and Store::Open rebuilds the catalog
// from them when the file is missing, corrupt, of another schema version or
// out of step with the refs (e.g. a crash between ref write and insert).
//
// Schema (version 1):
//   captures(id PK, created_ms, manifest_digest, logical_bytes, summary BLOB)
//       summary = serialized v1::CaptureSummary, returned as-is by List
//   kernels(capture_id PK -> captures, mangled, demangled, platform, arch)
//   agents(capture_id PK -> captures, pid, hostname, process_name, cmdline)
//   tags(capture_id -> captures, key, value, PK(capture_id, key))
// Child rows go with their capture (ON DELETE CASCADE). List joins them
// LEFT, so a capture whose child row went missing is still listed; Store::Open
// re-derives every row that disagrees with the refs (Rows()).
//
// Thread-safety: all methods are safe to call concurrently (one connection
// behind a mutex; catalog traffic is tiny next to ingest).
#ifndef KERNCAP_DAEMON_STORE_CATALOG_H_
#define KERNCAP_DAEMON_STORE_CATALOG_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "kerncap/v1/control.pb.h"
#include "kerncap/v1/manifest.pb.h"

struct sqlite3;

namespace kerncap::store {

class Catalog {
 public:
  // Opens or creates the database at `path` and checks it (quick_check and
  // schema version). DataLoss when it is damaged or of another version.
  static absl::StatusOr<std::unique_ptr<Catalog>> Open(const std::string& path);
  // Removes the database files at `path` (-wal/-shm included).
  static void Remove(const std::string& path);
  ~Catalog();

  absl::Status Upsert(const v1::CaptureManifest& manifest, const std::string& manifest_digest);
  absl::Status Delete(const std::string& capture_id);
  // Filters: kernel_contains (substring of demangled or mangled name), pid,
  // tag ("key=value", or "key" for presence), limit (0 = all), and, when
  // set, only the captures of `owner_uid`. Newest first.
  absl::StatusOr<std::vector<v1::CaptureSummary>> List(
      const v1::ListCapturesRequest& filter, std::optional<uint32_t> owner_uid = std::nullopt);
  absl::StatusOr<std::vector<std::string>> Ids();
  // One capture row as the catalog holds it, for the store's check against
  // its refs: `complete` is false when a child row is missing or the summary
  // does not parse or names another capture (each would change what List
  // answers for it).
  struct Row {
    std::string id;
    std::string manifest_digest;
    bool complete = false;
  };
  absl::StatusOr<std::vector<Row>> Rows();
  absl::StatusOr<uint64_t> TotalLogicalBytes();

  static v1::CaptureSummary Summarize(const v1::CaptureManifest& manifest);

 private:
  explicit Catalog(sqlite3* db) : db_(db) {}
  absl::Status Exec(const char* sql) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  absl::Mutex mu_;
  sqlite3* db_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kerncap::store

#endif  // KERNCAP_DAEMON_STORE_CATALOG_H_
