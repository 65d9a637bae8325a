#include "daemon/service/request_validation.h"

#include <sys/stat.h>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "common/control/limits.h"

namespace kerncap::service {
namespace {

absl::Status Invalid(absl::string_view field, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", what));
}

absl::Status ValidateString(absl::string_view s, absl::string_view field) {
  if (s.size() > kMaxStringBytes) {
    return Invalid(field,
                   absl::StrCat("too long (", s.size(), " bytes, at most ", kMaxStringBytes, ")"));
  }
  if (s.find('\0') != absl::string_view::npos) return Invalid(field, "contains a NUL byte");
  return absl::OkStatus();
}

absl::Status ValidateTags(const google::protobuf::Map<std::string, std::string>& tags) {
  if (tags.size() > kMaxTags) {
    return Invalid("tags", absl::StrCat(tags.size(), " tags, at most ", kMaxTags));
  }
  for (const auto& [key, value] : tags) {
    if (key.empty()) return Invalid("tags", "empty tag key");
    if (key.find('=') != std::string::npos) {
      return Invalid("tags", absl::StrCat("tag key \"", key, "\" contains '='"));
    }
    KC_RETURN_IF_ERROR(ValidateString(key, "tags"));
    KC_RETURN_IF_ERROR(ValidateString(value, "tags"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateId(absl::string_view id, absl::string_view field) {
  if (id.empty()) return Invalid(field, "required");
  if (id.size() > kMaxIdBytes) {
    return Invalid(field,
                   absl::StrCat("too long (", id.size(), " bytes, at most ", kMaxIdBytes, ")"));
  }
  if (id.find("..") != absl::string_view::npos) {
    return Invalid(field, absl::StrCat("\"", id, "\" contains \"..\""));
  }
  for (char c : id) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') {
      return Invalid(field, absl::StrCat("malformed id \"", absl::CHexEscape(id),
                                         "\" (allowed: letters, digits, '-', '_', '.')"));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateTagFilter(absl::string_view tag) {
  KC_RETURN_IF_ERROR(ValidateString(tag, "tag"));
  std::pair<absl::string_view, absl::string_view> kv = absl::StrSplit(tag, absl::MaxSplits('=', 1));
  // "key=value" matches that value; a bare "key" any capture with the tag.
  if (kv.first.empty()) {
    return Invalid("tag", absl::StrCat("\"", tag, "\" is neither key=value nor key"));
  }
  return absl::OkStatus();
}

absl::Status ValidateListCaptures(const v1::ListCapturesRequest& request) {
  KC_RETURN_IF_ERROR(ValidateString(request.kernel_contains(), "kernel_contains"));
  if (request.limit() > kMaxListLimit) {
    return Invalid("limit", absl::StrCat(request.limit(), " is above the maximum of ",
                                         kMaxListLimit, " (0 means no limit)"));
  }
  if (!request.tag().empty()) KC_RETURN_IF_ERROR(ValidateTagFilter(request.tag()));
  if (request.since_unix_ms() < 0 || request.until_unix_ms() < 0) {
    return Invalid("since_unix_ms/until_unix_ms", "must not be negative (0: no bound)");
  }
  if (request.until_unix_ms() != 0 && request.since_unix_ms() >= request.until_unix_ms()) {
    return Invalid("until_unix_ms", absl::StrCat(request.until_unix_ms(),
                                                 " is not after since_unix_ms ",
                                                 request.since_unix_ms()));
  }
  return absl::OkStatus();
}

absl::Status ValidateArm(const v1::ArmRequest& request, int64_t now_unix_ms) {
  const v1::Selector& s = request.selector();
  KC_RETURN_IF_ERROR(ValidateString(s.kernel(), "selector.kernel"));
  KC_RETURN_IF_ERROR(ValidateString(s.process_name(), "selector.process_name"));
  if (!v1::NameMatch_IsValid(s.match())) {
    return Invalid("selector.match", absl::StrCat("unknown value ", s.match()));
  }
  if (s.kernel().empty() && s.match() != v1::NAME_MATCH_UNSPECIFIED &&
      s.match() != v1::NAME_SUBSTRING) {
    return Invalid("selector.kernel", "required with glob, regex or mangled matching");
  }
  if (!v1::PerShape_IsValid(s.per_shape())) {
    return Invalid("selector.per_shape", absl::StrCat("unknown value ", s.per_shape()));
  }
  if (s.has_rank() && s.rank() < 0) {
    return Invalid("selector.rank", absl::StrCat("negative rank ", s.rank()));
  }
  if (s.has_device() && s.device() < 0) {
    return Invalid("selector.device", absl::StrCat("negative device ", s.device()));
  }
  if (s.count() > kMaxArmCount) {
    return Invalid("selector.count", absl::StrCat(s.count(), " is above ", kMaxArmCount));
  }
  if (s.skip() > kMaxArmCount * 1000) {
    return Invalid("selector.skip", absl::StrCat(s.skip(), " is absurdly large"));
  }
  if (s.nth() > kMaxArmCount * 1000) {
    return Invalid("selector.nth", absl::StrCat(s.nth(), " is absurdly large"));
  }
  if (request.expires_unix_ms() != 0 && request.ttl_ms() != 0) {
    return Invalid("ttl_ms", "set either ttl_ms or expires_unix_ms, not both");
  }
  if (request.expires_unix_ms() < 0 ||
      (request.expires_unix_ms() != 0 && request.expires_unix_ms() <= now_unix_ms)) {
    return Invalid("expires_unix_ms", "is in the past");
  }
  // One year: longer than any daemon should sensibly hold an arm.
  constexpr uint64_t kMaxTtlMs = 366ull * 24 * 3600 * 1000;
  if (request.ttl_ms() > kMaxTtlMs) {
    return Invalid("ttl_ms", absl::StrCat(request.ttl_ms(), " ms is longer than a year"));
  }
  return ValidateTags(request.tags());
}

absl::Status ValidateDisarm(const v1::DisarmRequest& request) {
  if (request.all() && !request.arm_id().empty()) {
    return Invalid("arm_id", "give an arm id or all, not both");
  }
  if (request.all()) return absl::OkStatus();
  if (request.arm_id().empty()) return Invalid("arm_id", "required (or set all)");
  return ValidateId(request.arm_id(), "arm_id");
}

absl::StatusOr<std::vector<Digest>> ParseDigests(
    const google::protobuf::RepeatedPtrField<std::string>& raw, size_t max,
    absl::string_view field) {
  if (static_cast<size_t>(raw.size()) > max) {
    return Invalid(field, absl::StrCat(raw.size(), " digests, at most ", max,
                                       " per request (send several requests)"));
  }
  std::vector<Digest> out;
  out.reserve(raw.size());
  for (int i = 0; i < raw.size(); ++i) {
    if (raw[i].size() != Digest::kSize) {
      return Invalid(field, absl::StrCat("entry ", i, " is ", raw[i].size(),
                                         " bytes; a SHA-256 digest is ", Digest::kSize));
    }
    KC_ASSIGN_OR_RETURN(Digest d, Digest::FromBytes(raw[i]));
    out.push_back(d);
  }
  return out;
}

absl::Status ValidateImportedManifest(const v1::CaptureManifest& manifest) {
  if (manifest.format_version() > 1) {
    return Invalid(
        "manifest.format_version",
        absl::StrCat(manifest.format_version(), " is newer than this daemon understands (1)"));
  }
  if (!manifest.capture_id().empty()) {
    KC_RETURN_IF_ERROR(ValidateId(manifest.capture_id(), "manifest.capture_id"));
  }
  return ValidateTags(manifest.tags());
}

absl::Status ValidateReferenceFolder(absl::string_view path) {
  if (path.empty()) return Invalid("path", "required");
  if (path.size() > kMaxPathBytes) return Invalid("path", "too long");
  if (path.find('\0') != absl::string_view::npos) return Invalid("path", "contains a NUL byte");
  if (path[0] != '/') {
    return Invalid("path",
                   absl::StrCat("\"", path, "\" is relative; the daemon needs an absolute path"));
  }
  for (absl::string_view part : absl::StrSplit(path, '/')) {
    if (part == "..") return Invalid("path", absl::StrCat("\"", path, "\" contains \"..\""));
  }
  struct stat st;
  std::string p(path);
  if (::stat(p.c_str(), &st) != 0) {
    return Invalid("path", absl::StrCat("\"", path, "\" does not exist on the daemon host"));
  }
  if (!S_ISDIR(st.st_mode)) {
    return Invalid("path", absl::StrCat("\"", path, "\" is not a directory"));
  }
  return absl::OkStatus();
}

absl::Status ValidateSubstituteTarget(const v1::SubstituteRequest& request) {
  const v1::Selector& sel = request.selector();
  const bool names_process = sel.pid() != 0 || !sel.process_name().empty() || sel.has_rank();
  if (!names_process && !request.all_processes()) {
    return absl::InvalidArgumentError(
        "the selector names no process (pid, process_name or rank): a substitution into every "
        "process you own needs all_processes (kerncapctl substitute: --pid, --process or "
        "--all-processes)");
  }
  if (request.preflight_capture().empty() == !request.no_preflight()) {
    return absl::InvalidArgumentError(
        request.no_preflight()
            ? "give preflight_capture or no_preflight, not both"
            : "name a preflight capture (kerncapd validates the variant against it before "
              "going live) or set no_preflight");
  }
  if (!request.preflight_capture().empty()) {
    KC_RETURN_IF_ERROR(ValidateId(request.preflight_capture(), "preflight_capture"));
  }
  return absl::OkStatus();
}

}  // namespace kerncap::service
