#include "daemon/store/catalog.h"

#include <fcntl.h>
#include <unistd.h>

#include <sqlite3.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"

namespace kerncap::store {
namespace {

// 2: captures.owner_uid (older catalogs are rebuilt from the manifests).
constexpr int kSchemaVersion = 2;

constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS captures(
  id TEXT PRIMARY KEY, created_ms INTEGER NOT NULL, manifest_digest TEXT NOT NULL,
  logical_bytes INTEGER NOT NULL, summary BLOB NOT NULL, owner_uid INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS kernels(
  capture_id TEXT PRIMARY KEY REFERENCES captures(id) ON DELETE CASCADE,
  mangled TEXT NOT NULL, demangled TEXT NOT NULL, platform INTEGER NOT NULL, arch TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS agents(
  capture_id TEXT PRIMARY KEY REFERENCES captures(id) ON DELETE CASCADE,
  pid INTEGER NOT NULL, hostname TEXT NOT NULL, process_name TEXT NOT NULL, cmdline TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS tags(
  capture_id TEXT NOT NULL REFERENCES captures(id) ON DELETE CASCADE,
  key TEXT NOT NULL, value TEXT NOT NULL, PRIMARY KEY(capture_id, key));
CREATE INDEX IF NOT EXISTS tags_by_kv ON tags(key, value);
CREATE INDEX IF NOT EXISTS agents_by_pid ON agents(pid);
CREATE INDEX IF NOT EXISTS captures_by_owner ON captures(owner_uid);
)sql";

// RAII statement with one-line binders; errors carry SQLite's message.
class Stmt {
 public:
  Stmt(sqlite3* db, const char* sql) : db_(db) {
    rc_ = sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr);
  }
  ~Stmt() { sqlite3_finalize(stmt_); }
  absl::Status status() const {
    if (rc_ == SQLITE_OK) return absl::OkStatus();
    return absl::InternalError(absl::StrCat("sqlite prepare: ", sqlite3_errmsg(db_)));
  }
  Stmt& Text(int i, const std::string& s) {
    sqlite3_bind_text(stmt_, i, s.data(), static_cast<int>(s.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Stmt& Blob(int i, const std::string& s) {
    sqlite3_bind_blob(stmt_, i, s.data(), static_cast<int>(s.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Stmt& Int(int i, int64_t v) {
    sqlite3_bind_int64(stmt_, i, v);
    return *this;
  }
  // SQLITE_ROW -> true, SQLITE_DONE -> false, else error.
  absl::StatusOr<bool> Step() {
    int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    return absl::InternalError(absl::StrCat("sqlite step: ", sqlite3_errmsg(db_)));
  }
  absl::Status Run() {
    auto r = Step();
    return r.ok() ? absl::OkStatus() : r.status();
  }
  sqlite3_stmt* get() { return stmt_; }

 private:
  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
  int rc_;
};

std::string ColumnText(sqlite3_stmt* s, int i) {
  const unsigned char* t = sqlite3_column_text(s, i);
  return t ? std::string(reinterpret_cast<const char*>(t),
                         static_cast<size_t>(sqlite3_column_bytes(s, i)))
           : std::string();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Catalog>> Catalog::Open(const std::string& path) {
  // SQLite creates a database 0644 (and its -wal/-shm files with the same
  // mode as the database): create it private first, whatever the umask.
  if (int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0640); fd >= 0) {
    ::close(fd);
  }
  sqlite3* db = nullptr;
  int rc =
      sqlite3_open_v2(path.c_str(), &db,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    std::string msg = db ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close(db);
    return absl::DataLossError(absl::StrCat("catalog ", path, ": ", msg));
  }
  std::unique_ptr<Catalog> c(new Catalog(db));
  absl::MutexLock l(&c->mu_);
  // The catalog is rebuildable, so it does not need per-commit fsync; WAL
  // keeps readers off the writer's back.
  sqlite3_busy_timeout(db, 5000);
  absl::Status st = c->Exec(
      "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; "
      "PRAGMA foreign_keys=ON;");
  if (st.ok()) {
    Stmt check(db, "PRAGMA quick_check");
    st = check.status();
    if (st.ok()) {
      auto row = check.Step();
      if (!row.ok()) {
        st = row.status();
      } else if (!*row || ColumnText(check.get(), 0) != "ok") {
        st = absl::DataLossError(absl::StrCat("catalog ", path, " failed quick_check"));
      }
    }
  }
  if (st.ok()) st = c->Exec(kSchema);
  if (st.ok()) {
    Stmt get(db, "SELECT value FROM meta WHERE key='schema_version'");
    st = get.status();
    if (st.ok()) {
      auto row = get.Step();
      if (!row.ok()) {
        st = row.status();
      } else if (!*row) {
        Stmt put(db, "INSERT INTO meta(key, value) VALUES('schema_version', ?1)");
        put.Text(1, std::to_string(kSchemaVersion));
        st = put.status().ok() ? put.Run() : put.status();
      } else if (ColumnText(get.get(), 0) != std::to_string(kSchemaVersion)) {
        st = absl::DataLossError(
            absl::StrCat("catalog ", path, " has schema version ", ColumnText(get.get(), 0)));
      }
    }
  }
  if (!st.ok()) {
    return absl::DataLossError(absl::StrCat("catalog ", path, ": ", st.message()));
  }
  return c;
}

void Catalog::Remove(const std::string& path) {
  for (const char* suffix : {"", "-wal", "-shm", "-journal"}) {
    ::unlink(absl::StrCat(path, suffix).c_str());
  }
}

Catalog::~Catalog() {
  absl::MutexLock l(&mu_);
  sqlite3_close(db_);
}

absl::Status Catalog::Exec(const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err ? err : sqlite3_errmsg(db_);
    sqlite3_free(err);
    return absl::InternalError(absl::StrCat("sqlite: ", msg));
  }
  return absl::OkStatus();
}

v1::CaptureSummary Catalog::Summarize(const v1::CaptureManifest& m) {
  v1::CaptureSummary s;
  s.set_capture_id(m.capture_id());
  s.set_created_unix_ms(m.created_unix_ms());
  s.set_kernel(m.kernel().demangled_name().empty() ? m.kernel().mangled_name()
                                                   : m.kernel().demangled_name());
  s.set_mangled_name(m.kernel().mangled_name());
  s.set_platform(m.kernel().platform());
  s.set_pid(m.process().pid());
  s.set_hostname(m.process().hostname());
  s.set_process_name(m.process().process_name());
  s.set_device(m.device().name());
  s.set_regions(static_cast<uint32_t>(m.pre().regions_size()));
  s.set_logical_bytes(m.stats().logical_bytes());
  s.set_new_stored_bytes(m.stats().new_stored_bytes());
  s.set_source(m.source());
  for (const auto& [k, v] : m.tags()) (*s.mutable_tags())[k] = v;
  s.set_owner_uid(m.owner_uid());
  return s;
}

absl::Status Catalog::Upsert(const v1::CaptureManifest& m, const std::string& manifest_digest) {
  absl::MutexLock l(&mu_);
  KC_RETURN_IF_ERROR(Exec("BEGIN IMMEDIATE"));
  auto body = [&]() -> absl::Status {
    // Child rows by their own key too: a damaged catalog may hold children
    // whose capture row is gone (written without foreign keys enforced).
    for (const char* sql :
         {"DELETE FROM captures WHERE id=?1", "DELETE FROM kernels WHERE capture_id=?1",
          "DELETE FROM agents WHERE capture_id=?1", "DELETE FROM tags WHERE capture_id=?1"}) {
      Stmt del(db_, sql);
      KC_RETURN_IF_ERROR(del.status());
      KC_RETURN_IF_ERROR(del.Text(1, m.capture_id()).Run());
    }
    {
      Stmt ins(db_,
               "INSERT INTO captures(id, created_ms, manifest_digest, logical_bytes, summary, "
               "owner_uid) VALUES(?1, ?2, ?3, ?4, ?5, ?6)");
      KC_RETURN_IF_ERROR(ins.status());
      KC_RETURN_IF_ERROR(ins.Text(1, m.capture_id())
                             .Int(2, m.created_unix_ms())
                             .Text(3, manifest_digest)
                             .Int(4, static_cast<int64_t>(m.stats().logical_bytes()))
                             .Blob(5, Summarize(m).SerializeAsString())
                             .Int(6, m.owner_uid())
                             .Run());
    }
    {
      Stmt ins(db_,
               "INSERT INTO kernels(capture_id, mangled, demangled, platform, arch) "
               "VALUES(?1, ?2, ?3, ?4, ?5)");
      KC_RETURN_IF_ERROR(ins.status());
      KC_RETURN_IF_ERROR(ins.Text(1, m.capture_id())
                             .Text(2, m.kernel().mangled_name())
                             .Text(3, m.kernel().demangled_name())
                             .Int(4, m.kernel().platform())
                             .Text(5, m.kernel().arch())
                             .Run());
    }
    {
      Stmt ins(db_,
               "INSERT INTO agents(capture_id, pid, hostname, process_name, cmdline) "
               "VALUES(?1, ?2, ?3, ?4, ?5)");
      KC_RETURN_IF_ERROR(ins.status());
      std::vector<std::string> cmd(m.process().cmdline().begin(), m.process().cmdline().end());
      KC_RETURN_IF_ERROR(ins.Text(1, m.capture_id())
                             .Int(2, m.process().pid())
                             .Text(3, m.process().hostname())
                             .Text(4, m.process().process_name())
                             .Text(5, absl::StrJoin(cmd, " "))
                             .Run());
    }
    for (const auto& [k, v] : m.tags()) {
      Stmt ins(db_, "INSERT INTO tags(capture_id, key, value) VALUES(?1, ?2, ?3)");
      KC_RETURN_IF_ERROR(ins.status());
      KC_RETURN_IF_ERROR(ins.Text(1, m.capture_id()).Text(2, k).Text(3, v).Run());
    }
    return absl::OkStatus();
  };
  absl::Status st = body();
  if (!st.ok()) {
    (void)Exec("ROLLBACK");
    return st;
  }
  return Exec("COMMIT");
}

absl::Status Catalog::Delete(const std::string& capture_id) {
  absl::MutexLock l(&mu_);
  Stmt del(db_, "DELETE FROM captures WHERE id=?1");
  KC_RETURN_IF_ERROR(del.status());
  return del.Text(1, capture_id).Run();
}

absl::StatusOr<std::vector<v1::CaptureSummary>> Catalog::List(const v1::ListCapturesRequest& f,
                                                              std::optional<uint32_t> owner_uid) {
  std::string tag_key = f.tag();
  std::string tag_value;
  bool tag_has_value = false;
  if (size_t eq = f.tag().find('='); eq != std::string::npos) {
    tag_key = f.tag().substr(0, eq);
    tag_value = f.tag().substr(eq + 1);
    tag_has_value = true;
  }
  absl::MutexLock l(&mu_);
  Stmt q(db_,
         "SELECT c.summary, c.id FROM captures c "
         "LEFT JOIN kernels k ON k.capture_id = c.id LEFT JOIN agents a ON a.capture_id = c.id "
         "WHERE (?1 = '' OR instr(k.demangled, ?1) > 0 OR instr(k.mangled, ?1) > 0) "
         "AND (?2 = 0 OR a.pid = ?2) "
         "AND (?3 = '' OR EXISTS (SELECT 1 FROM tags t WHERE t.capture_id = c.id "
         "     AND t.key = ?3 AND (?4 = 0 OR t.value = ?5))) "
         "AND (?7 = 0 OR c.created_ms >= ?7) AND (?8 = 0 OR c.created_ms < ?8) "
         "AND (?9 = 0 OR c.owner_uid = ?10) "
         "ORDER BY c.created_ms DESC, c.id LIMIT ?6");
  KC_RETURN_IF_ERROR(q.status());
  q.Text(1, f.kernel_contains())
      .Int(2, f.pid())
      .Text(3, tag_key)
      .Int(4, tag_has_value ? 1 : 0)
      .Text(5, tag_value)
      .Int(6, f.limit() == 0 ? -1 : static_cast<int64_t>(f.limit()))
      .Int(7, f.since_unix_ms())
      .Int(8, f.until_unix_ms())
      .Int(9, owner_uid.has_value() ? 1 : 0)
      .Int(10, owner_uid.value_or(0));
  std::vector<v1::CaptureSummary> out;
  while (true) {
    KC_ASSIGN_OR_RETURN(bool row, q.Step());
    if (!row) break;
    v1::CaptureSummary s;
    const void* blob = sqlite3_column_blob(q.get(), 0);
    int n = sqlite3_column_bytes(q.get(), 0);
    if (!s.ParseFromArray(blob, n)) {
      return absl::DataLossError(absl::StrCat(
          "the catalog's row for ", ColumnText(q.get(), 1),
          " does not parse; restart kerncapd to rebuild the catalog from the refs"));
    }
    out.push_back(std::move(s));
  }
  return out;
}

absl::StatusOr<std::vector<std::string>> Catalog::Ids() {
  absl::MutexLock l(&mu_);
  Stmt q(db_, "SELECT id FROM captures");
  KC_RETURN_IF_ERROR(q.status());
  std::vector<std::string> out;
  while (true) {
    KC_ASSIGN_OR_RETURN(bool row, q.Step());
    if (!row) break;
    out.push_back(ColumnText(q.get(), 0));
  }
  return out;
}

absl::StatusOr<std::vector<Catalog::Row>> Catalog::Rows() {
  absl::MutexLock l(&mu_);
  Stmt q(db_,
         "SELECT c.id, c.manifest_digest, c.summary, "
         "(SELECT COUNT(*) FROM kernels k WHERE k.capture_id = c.id), "
         "(SELECT COUNT(*) FROM agents a WHERE a.capture_id = c.id) FROM captures c");
  KC_RETURN_IF_ERROR(q.status());
  std::vector<Row> out;
  while (true) {
    KC_ASSIGN_OR_RETURN(bool row, q.Step());
    if (!row) break;
    Row r;
    r.id = ColumnText(q.get(), 0);
    r.manifest_digest = ColumnText(q.get(), 1);
    v1::CaptureSummary s;
    const bool parses = s.ParseFromArray(sqlite3_column_blob(q.get(), 2),
                                         sqlite3_column_bytes(q.get(), 2));
    r.complete = parses && s.capture_id() == r.id && sqlite3_column_int64(q.get(), 3) == 1 &&
                 sqlite3_column_int64(q.get(), 4) == 1;
    out.push_back(std::move(r));
  }
  return out;
}

absl::StatusOr<uint64_t> Catalog::TotalLogicalBytes() {
  absl::MutexLock l(&mu_);
  Stmt q(db_, "SELECT COALESCE(SUM(logical_bytes), 0) FROM captures");
  KC_RETURN_IF_ERROR(q.status());
  KC_ASSIGN_OR_RETURN(bool row, q.Step());
  if (!row) return 0;
  return static_cast<uint64_t>(sqlite3_column_int64(q.get(), 0));
}

}  // namespace kerncap::store
