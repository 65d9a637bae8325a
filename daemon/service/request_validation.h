// request_validation.h: checks applied to every incoming request before it
// reaches the store or the agents. Each returns InvalidArgument with a
// message naming the field and what is wrong with it; the daemon keeps
// serving after any of them.
#ifndef KERNCAP_DAEMON_SERVICE_REQUEST_VALIDATION_H_
#define KERNCAP_DAEMON_SERVICE_REQUEST_VALIDATION_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/digest.h"
#include "google/protobuf/repeated_field.h"
#include "kerncap/v1/control.pb.h"

namespace kerncap::service {

// Capture or arm id, or a unique prefix of one: non-empty, at most
// kMaxIdBytes, only [A-Za-z0-9._-], and never "..".
absl::Status ValidateId(absl::string_view id, absl::string_view field);

// ListCaptures' tag filter: "key=value", or a bare "key" (has the tag, any
// value; the catalog matches both), with a non-empty key.
absl::Status ValidateTagFilter(absl::string_view tag);

absl::Status ValidateListCaptures(const v1::ListCapturesRequest& request);
absl::Status ValidateArm(const v1::ArmRequest& request, int64_t now_unix_ms);
absl::Status ValidateDisarm(const v1::DisarmRequest& request);
// A substitution names the processes it goes into (pid, process name or
// rank), or says all_processes; it names a preflight capture or says
// no_preflight. Pushing code into every process needs an explicit yes.
absl::Status ValidateSubstituteTarget(const v1::SubstituteRequest& request);

// Parses raw 32-byte digests, at most `max` of them.
absl::StatusOr<std::vector<Digest>> ParseDigests(
    const google::protobuf::RepeatedPtrField<std::string>& raw, size_t max,
    absl::string_view field);

// Checks the shape of a manifest arriving through ImportCapture.
absl::Status ValidateImportedManifest(const v1::CaptureManifest& manifest);

// Path of a reference-Kerncap folder on the daemon host: absolute, no ".."
// component, no NUL, an existing directory.
absl::Status ValidateReferenceFolder(absl::string_view path);

}  // namespace kerncap::service

#endif  // KERNCAP_DAEMON_SERVICE_REQUEST_VALIDATION_H_
