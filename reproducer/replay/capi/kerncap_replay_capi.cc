// kerncap_replay_capi.cc: the C API of libkerncap_replay.so over
// ReplaySession (see kerncap_replay_capi.h). Every entry point catches C++
// exceptions: nothing but a return code and a message crosses the C boundary.
#include "reproducer/replay/capi/kerncap_replay_capi.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "common/exit_codes.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/status_macros.h"
#include "common/version.h"
#include "nlohmann/json.hpp"
#include "reproducer/replay/core/capture_source.h"
#include "reproducer/replay/core/comparator.h"
#include "reproducer/replay/core/compare_options.h"
#include "reproducer/replay/cuda/cuda_driver.h"
#include "reproducer/replay/cuda/replay_session.h"
#include "reproducer/replay/core/report.h"
#include "reproducer/replay/cuda/texture_objects.h"

#ifndef KERNCAP_REPLAY_VERSION_STRING
#define KERNCAP_REPLAY_VERSION_STRING "unknown"
#endif

using nlohmann::json;

struct kerncap_replay {
  std::string path;  // the .kcap file actually opened
  kerncap::replay::SessionOptions options;
  // Declared before the session: the session points into it, and members
  // are destroyed in reverse order.
  std::unique_ptr<kerncap::replay::CaptureSource> source;
  std::unique_ptr<kerncap::replay::ReplaySession> session;  // set by a successful prepare
  std::string info;                                         // kerncap_replay_info_json's text
};

namespace kerncap::replay::capi {
namespace {

namespace fs = std::filesystem;

// Return codes, as kerncap-replay's exit codes.
constexpr int kUsage = KERNCAP_REPLAY_E_USAGE;          // bad arguments or options
constexpr int kError = KERNCAP_REPLAY_E_REPLAY;         // the replay failed
constexpr int kNoDevice = KERNCAP_REPLAY_E_NO_DEVICE;   // no CUDA driver or device
static_assert(kUsage == exit_code::kUsage && kError == exit_code::kError &&
                  kNoDevice == exit_code::kNoDevice,
              "the C API's codes are the shared exit-code table's (common/exit_codes.h)");

void SetError(char* err, size_t err_size, absl::string_view msg) {
  if (err == nullptr || err_size == 0) return;
  const size_t n = std::min(msg.size(), err_size - 1);
  for (size_t i = 0; i < n; ++i) {
    const char c = msg[i];
    err[i] = (c == '\n' || c == '\r') ? ' ' : c;  // one line
  }
  err[n] = '\0';
}

int CodeOf(const absl::Status& s) {
  if (IsNoCudaDeviceError(s)) return kNoDevice;
  return absl::IsInvalidArgument(s) ? kUsage : kError;
}

// Runs `body` (returning absl::Status); maps failures and exceptions to a
// return code and a message.
template <typename F>
int Guard(char* err, size_t err_size, F&& body) {
  try {
    absl::Status s = body();
    if (s.ok()) return 0;
    SetError(err, err_size, s.message());
    return CodeOf(s);
  } catch (const std::exception& e) {
    SetError(err, err_size, absl::StrCat("kerncap_replay: internal error: ", e.what()));
  } catch (...) {
    SetError(err, err_size, "kerncap_replay: internal error (unknown exception)");
  }
  return kError;
}

std::string Dump(const json& j) {
  // Names come from the captured application: never throw on bad UTF-8.
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string HexBytes(absl::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out.push_back(kDigits[c >> 4]);
    out.push_back(kDigits[c & 0xf]);
  }
  return out;
}

const char* PlatformName(v1::Platform p) {
  switch (p) {
    case v1::PLATFORM_CUDA: return "cuda";
    case v1::PLATFORM_HSA: return "hsa";
    case v1::PLATFORM_SYNTHETIC: return "synthetic";
    default: return "unspecified";
  }
}

const char* ArgumentKindName(v1::ArgumentKind k) {
  switch (k) {
    case v1::ARG_BY_VALUE: return "by_value";
    case v1::ARG_POINTER: return "pointer";
    case v1::ARG_HIDDEN: return "hidden";
    default: return "unspecified";
  }
}

// ---- open ------------------------------------------------------------------

absl::StatusOr<std::string> ResolveCapturePath(const char* capture_path) {
  if (capture_path == nullptr || *capture_path == '\0') {
    return absl::InvalidArgumentError("kerncap_replay_open: capture_path is empty");
  }
  const fs::path p(capture_path);
  std::error_code ec;
  const fs::file_status st = fs::status(p, ec);
  if (!fs::exists(st)) {
    return absl::NotFoundError(
        absl::StrCat("capture ", capture_path, ": no such file or folder"));
  }
  if (!fs::is_directory(st)) return p.string();
  if (fs::is_regular_file(p / "capture.kcap", ec)) return (p / "capture.kcap").string();
  std::vector<std::string> found;
  for (fs::directory_iterator it(p, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->path().extension() == ".kcap" && it->is_regular_file(ec)) {
      found.push_back(it->path().string());
    }
  }
  if (ec) return absl::NotFoundError(absl::StrCat("capture folder ", capture_path, ": ", ec.message()));
  if (found.size() == 1) return found[0];
  if (found.empty()) {
    return absl::NotFoundError(absl::StrCat("capture folder ", capture_path,
                                            " holds no capture.kcap and no other .kcap file"));
  }
  return absl::InvalidArgumentError(absl::StrCat("capture folder ", capture_path, " holds ",
                                                 found.size(),
                                                 " .kcap files and no capture.kcap: name one"));
}

absl::Status ParseOpenOptions(const char* text, SessionOptions* so, bool* verify_digests) {
  if (text == nullptr || *text == '\0') return absl::OkStatus();
  const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return absl::InvalidArgumentError(absl::StrCat("options_json is not JSON: ", text));
  }
  if (j.is_null()) return absl::OkStatus();
  if (!j.is_object()) return absl::InvalidArgumentError("options_json must be a JSON object");
  auto boolean = [](const json& v, const std::string& key, bool* out) -> absl::Status {
    if (v.is_null()) return absl::OkStatus();
    if (!v.is_boolean()) {
      return absl::InvalidArgumentError(absl::StrCat("options_json: '", key, "' must be a bool"));
    }
    *out = v.get<bool>();
    return absl::OkStatus();
  };
  for (const auto& [key, v] : j.items()) {
    if (key == "device") {
      if (v.is_null()) continue;
      if (!v.is_number_integer() || v.get<int64_t>() < -1 || v.get<int64_t>() > 1 << 20) {
        return absl::InvalidArgumentError(
            "options_json: 'device' must be an integer >= -1 (-1: the captured device)");
      }
      so->device = static_cast<int>(v.get<int64_t>());
    } else if (key == "allow_relocation") {
      KC_RETURN_IF_ERROR(boolean(v, key, &so->allow_relocation));
    } else if (key == "force_relocation") {
      KC_RETURN_IF_ERROR(boolean(v, key, &so->force_relocation));
    } else if (key == "verify_digests") {
      KC_RETURN_IF_ERROR(boolean(v, key, verify_digests));
    } else if (key == "code_object") {
      if (v.is_null()) continue;
      if (!v.is_string()) {
        return absl::InvalidArgumentError("options_json: 'code_object' must be a path (string)");
      }
      so->code_object_path = v.get<std::string>();
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "options_json: unknown key '", key,
          "' (device, allow_relocation, force_relocation, code_object, verify_digests)"));
    }
  }
  if (so->force_relocation && !so->allow_relocation) {
    return absl::InvalidArgumentError(
        "options_json: force_relocation needs allow_relocation (both were given, contradicting)");
  }
  if (!so->code_object_path.empty()) {
    std::error_code ec;
    if (!fs::is_regular_file(so->code_object_path, ec)) {
      return absl::NotFoundError(
          absl::StrCat("options_json: code_object ", so->code_object_path, ": no such file"));
    }
  }
  return absl::OkStatus();
}

// ---- info ------------------------------------------------------------------

bool Written(const v1::Region& pre, const v1::Region* post) {
  if (post == nullptr) return false;
  if (post->diff()) return post->changed_chunks_size() > 0;
  if (post->data().size() != pre.data().size()) return true;
  const auto& a = pre.data().chunk_digests();
  const auto& b = post->data().chunk_digests();
  return a.size() != b.size() || !std::equal(a.begin(), a.end(), b.begin());
}

json Dims(const google::protobuf::RepeatedField<uint32_t>& v) {
  json d = json::array();
  for (int i = 0; i < 3; ++i) d.push_back(i < v.size() && v.Get(i) != 0 ? v.Get(i) : 1u);
  return d;
}

// The pre region holding `value` (an 8-byte argument's value), or -1.
int64_t RegionHolding(const v1::CaptureManifest& m, uint64_t value) {
  for (int i = 0; i < m.pre().regions_size(); ++i) {
    const v1::Region& r = m.pre().regions(i);
    if (value >= r.va() && value - r.va() < r.data().size()) return i;
  }
  return -1;
}

json InfoJson(const kerncap_replay& h) {
  const v1::CaptureManifest& m = h.source->manifest();
  json j;
  j["capture_id"] = m.capture_id();
  j["capture_path"] = h.path;

  json kernel = {{"name", m.kernel().mangled_name()},
                 {"demangled", m.kernel().demangled_name()},
                 {"platform", PlatformName(m.kernel().platform())},
                 {"arch", m.kernel().arch()}};
  if (!m.kernel().jit_metadata_json().empty()) {
    json meta = json::parse(m.kernel().jit_metadata_json(), nullptr, false);
    kernel["jit_metadata"] = meta.is_discarded() ? json(m.kernel().jit_metadata_json()) : meta;
  }
  j["kernel"] = kernel;
  j["device"] = {{"ordinal", m.device().ordinal()},
                 {"name", m.device().name()},
                 {"arch", m.device().arch()},
                 {"uuid", m.device().uuid()}};
  j["prepared"] = h.session != nullptr;
  j["relocated"] = h.session != nullptr && h.session->info().relocated;
  j["relocation"] = h.session != nullptr
                        ? RelocationSeverityName(h.session->info().relocation())
                        : RelocationSeverityName(RelocationSeverity::kNone);
  j["post_complete"] = m.post_complete();

  const v1::LaunchConfig& l = m.launch();
  json attributes = json::object();
  for (const auto& [k, v] : l.attributes()) attributes[k] = v;
  j["launch"] = {{"grid", Dims(l.grid())},
                 {"block", Dims(l.block())},
                 {"shared_bytes", l.shared_mem_bytes()},
                 {"private_bytes", l.private_mem_bytes()},
                 {"cluster", Dims(l.cluster())},
                 {"cooperative", l.cooperative()},
                 {"attributes", attributes}};

  const std::string& blob = m.argument_blob();
  j["argument_blob_hex"] = HexBytes(blob);
  json args = json::array();
  for (int i = 0; i < m.arguments_size(); ++i) {
    const v1::Argument& a = m.arguments(i);
    absl::string_view bytes;
    if (a.offset() < blob.size()) {
      bytes = absl::string_view(blob).substr(a.offset(), a.size());
    }
    json aj = {{"index", i},
               {"offset", a.offset()},
               {"size", a.size()},
               {"kind", ArgumentKindName(a.kind())},
               {"name", a.name()},
               {"type_name", a.type_name()},
               {"hex", HexBytes(bytes)}};
    if (bytes.size() < a.size()) aj["truncated"] = true;  // outside the captured blob
    if (h.session != nullptr && a.offset() < h.session->launch_arguments().size()) {
      aj["replay_hex"] =
          HexBytes(absl::string_view(h.session->launch_arguments()).substr(a.offset(), a.size()));
    }
    int64_t region = -1;
    uint64_t value = 0;
    if (a.size() == 8 && bytes.size() == 8 && a.kind() != v1::ARG_HIDDEN) {
      std::memcpy(&value, bytes.data(), 8);
      region = RegionHolding(m, value);
    }
    aj["pointer_region"] = region;
    if (region >= 0) aj["pointer_offset"] = value - m.pre().regions(static_cast<int>(region)).va();
    args.push_back(std::move(aj));
  }
  j["arguments"] = std::move(args);

  // Texture/surface objects: their handles mean nothing outside the captured
  // process; after prepare the replay's own objects stand in for them.
  json textures = json::array();
  for (int i = 0; i < m.texture_objects_size(); ++i) {
    const v1::TextureObject& t = m.texture_objects(i);
    json tj = {{"type", t.type() == v1::TextureObject::SURFACE_OBJECT ? "surface" : "texture"},
               {"captured_handle", t.handle()},
               {"argument_offsets", json(std::vector<uint32_t>(t.argument_offsets().begin(),
                                                               t.argument_offsets().end()))},
               {"captured_ptr", t.resource().device_ptr()},
               {"bytes", TextureResourceExtent(t.resource())}};
    if (h.session != nullptr) {
      const bool surface = t.type() == v1::TextureObject::SURFACE_OBJECT;
      for (const ReplayedTextureObject& o : h.session->info().texture_objects) {
        if (o.captured_handle == t.handle() && o.surface == surface) {
          tj["replay_handle"] = o.replay_handle;
          tj["replay_ptr"] = o.replay_ptr;
        }
      }
    }
    textures.push_back(std::move(tj));
  }
  j["texture_objects"] = std::move(textures);

  std::map<std::pair<uint64_t, uint32_t>, const v1::Region*> post;
  for (const v1::Region& r : m.post().regions()) post[{r.va(), r.device()}] = &r;
  json regions = json::array();
  for (int i = 0; i < m.pre().regions_size(); ++i) {
    const v1::Region& r = m.pre().regions(i);
    auto it = post.find({r.va(), r.device()});
    json rj = {{"index", i},
               {"name", r.name()},
               {"captured_va", r.va()},
               {"size", r.data().size()},
               {"kind", RegionKindName(r.kind())},
               {"device", r.device()},
               {"host", r.kind() == v1::REGION_HOST_PINNED},
               {"written", Written(r, it == post.end() ? nullptr : it->second)}};
    if (h.session != nullptr) {
      const ReplaySession::RegionPlacement p = h.session->placement(static_cast<size_t>(i));
      rj["restored"] = p.restored;
      rj["replay_va"] = p.restored ? p.replay_va : 0;
    }
    regions.push_back(std::move(rj));
  }
  j["regions"] = std::move(regions);
  if (h.session != nullptr) {
    j["replay"] = ReplayInfoJson(h.session->info());
    j["replay_device"] = static_cast<int64_t>(h.session->device());  // CUdevice == ordinal
  }
  return j;
}

// ---- session ---------------------------------------------------------------

absl::Status CheckHandle(const kerncap_replay* h, const char* fn) {
  if (h == nullptr) return absl::InvalidArgumentError(absl::StrCat(fn, ": the handle is NULL"));
  return absl::OkStatus();
}

// Makes the session's (primary) context current on the calling thread.
absl::Status BindContext(const kerncap_replay& h) {
  KC_ASSIGN_OR_RETURN(const CudaDriver* cu, CudaDriver::Get());
  return cu->Check(cu->cuCtxSetCurrent(h.session->context()),
                   "cuCtxSetCurrent(the device's primary context)");
}

absl::Status Prepare(kerncap_replay* h) {
  if (h->session != nullptr) return BindContext(*h);
  KC_ASSIGN_OR_RETURN(std::unique_ptr<ReplaySession> s,
                      ReplaySession::Create(h->source.get(), h->options));
  // On failure `s` goes out of scope here and releases whatever Prepare took
  // (mappings, reservations, the context), so a later prepare starts afresh.
  KC_RETURN_IF_ERROR(s->Prepare());
  h->session = std::move(s);
  return BindContext(*h);
}

// ---- validate --------------------------------------------------------------

// The tolerance keys of one object (top level or one region's).
struct ToleranceKeys {
  std::optional<DType> dtype;
  std::optional<double> atol, rtol;
  std::optional<uint64_t> ulp;
  bool has_tolerance() const { return atol || rtol || ulp; }
};

absl::Status ParseToleranceKey(const std::string& where, const std::string& key, const json& v,
                               ToleranceKeys* out, bool* known) {
  *known = true;
  if (key == "dtype") {
    if (v.is_null()) return absl::OkStatus();
    if (!v.is_string()) {
      return absl::InvalidArgumentError(absl::StrCat(where, "'dtype' must be a string"));
    }
    auto d = ParseDType(v.get<std::string>());
    if (!d.ok()) return absl::InvalidArgumentError(absl::StrCat(where, d.status().message()));
    out->dtype = *d;
  } else if (key == "atol" || key == "rtol") {
    if (v.is_null()) return absl::OkStatus();
    if (!v.is_number() || !(v.get<double>() >= 0)) {
      return absl::InvalidArgumentError(absl::StrCat(where, "'", key, "' must be a number >= 0"));
    }
    (key == "atol" ? out->atol : out->rtol) = v.get<double>();
  } else if (key == "ulp") {
    if (v.is_null()) return absl::OkStatus();
    const bool integral_float = v.is_number_float() && v.get<double>() >= 0 &&
                                v.get<double>() < 1.8e19 &&
                                v.get<double>() == static_cast<double>(v.get<uint64_t>());
    if (!(v.is_number_unsigned() || (v.is_number_integer() && v.get<int64_t>() >= 0) ||
          integral_float)) {
      return absl::InvalidArgumentError(absl::StrCat(where, "'ulp' must be an integer >= 0"));
    }
    out->ulp = v.get<uint64_t>();
  } else {
    *known = false;
  }
  return absl::OkStatus();
}

absl::StatusOr<CompareOptions> ParseCompareOptions(const char* text,
                                                   const v1::CaptureManifest& m) {
  CompareOptions o;
  if (text == nullptr || *text == '\0') return o;
  const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return absl::InvalidArgumentError(absl::StrCat("validate options are not JSON: ", text));
  }
  if (j.is_null()) return o;
  if (!j.is_object()) return absl::InvalidArgumentError("validate options must be a JSON object");
  ToleranceKeys top;
  const json* regions = nullptr;
  for (const auto& [key, v] : j.items()) {
    bool known = false;
    KC_RETURN_IF_ERROR(ParseToleranceKey("validate options: ", key, v, &top, &known));
    if (known) continue;
    if (key == "nan_unequal") {
      if (v.is_null()) continue;
      if (!v.is_boolean()) {
        return absl::InvalidArgumentError("validate options: 'nan_unequal' must be a bool");
      }
      o.tolerance.nan_equal = !v.get<bool>();
    } else if (key == "regions") {
      if (v.is_null()) continue;
      if (!v.is_object()) {
        return absl::InvalidArgumentError(
            "validate options: 'regions' must be an object {\"<index, 0xVA or name>\": {...}}");
      }
      regions = &v;
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "validate options: unknown key '", key,
          "' (dtype, atol, rtol, ulp, nan_unequal, regions)"));
    }
  }
  o.dtype = top.dtype;
  o.tolerance.atol = top.atol.value_or(0);
  o.tolerance.rtol = top.rtol.value_or(0);
  o.tolerance.ulp = top.ulp.value_or(0);
  bool any_region_dtype = false;
  if (regions != nullptr) {
    for (const auto& [sel, v] : regions->items()) {
      const std::string where = absl::StrCat("validate options: regions['", sel, "']: ");
      RegionDTypeRule rule;
      bool matches = false;
      if (absl::StartsWithIgnoreCase(sel, "0x")) {
        uint64_t va = 0;
        if (!absl::SimpleHexAtoi(absl::string_view(sel).substr(2), &va)) {
          return absl::InvalidArgumentError(absl::StrCat(where, "bad address"));
        }
        rule.va = va;
        for (const v1::Region& r : m.pre().regions()) matches |= r.va() == va;
      } else if (uint64_t idx = 0; !sel.empty() && absl::ascii_isdigit(sel[0]) &&
                                   absl::SimpleAtoi(sel, &idx)) {
        rule.index = static_cast<size_t>(idx);
        matches = idx < static_cast<uint64_t>(m.pre().regions_size());
      } else {
        rule.name = sel;
        for (const v1::Region& r : m.pre().regions()) matches |= !sel.empty() && r.name() == sel;
      }
      if (!matches) {
        return absl::InvalidArgumentError(absl::StrCat(
            where, "no such region in the capture (", m.pre().regions_size(),
            " regions; select by index, captured address 0x... or name)"));
      }
      if (!v.is_object()) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, "must be an object with dtype, atol, rtol or ulp"));
      }
      ToleranceKeys keys;
      for (const auto& [key, kv] : v.items()) {
        bool known = false;
        KC_RETURN_IF_ERROR(ParseToleranceKey(where, key, kv, &keys, &known));
        if (!known) {
          return absl::InvalidArgumentError(
              absl::StrCat(where, "unknown key '", key, "' (dtype, atol, rtol, ulp)"));
        }
      }
      if (!keys.dtype && !keys.has_tolerance()) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, "sets nothing (give dtype, atol, rtol or ulp)"));
      }
      const std::optional<DType> dtype = keys.dtype ? keys.dtype : o.dtype;
      if (!dtype) {
        return absl::InvalidArgumentError(absl::StrCat(
            where, "atol/rtol/ulp need a dtype: give the region a dtype, or a global one"));
      }
      any_region_dtype |= keys.dtype.has_value();
      rule.dtype = *dtype;
      if (keys.has_tolerance()) {
        Tolerance t = o.tolerance;
        if (keys.atol) t.atol = *keys.atol;
        if (keys.rtol) t.rtol = *keys.rtol;
        if (keys.ulp) t.ulp = *keys.ulp;
        rule.tolerance = t;
      }
      o.rules.push_back(std::move(rule));
    }
  }
  if (top.has_tolerance() && !o.dtype && !any_region_dtype) {
    return absl::InvalidArgumentError(
        "validate options: atol/rtol/ulp given but no dtype: tolerances apply to typed elements "
        "only (give \"dtype\", or a dtype per region); without one every region is compared "
        "bitwise");
  }
  return o;
}

json RegionDiffJson(const RegionResult& r) {
  const CompareStats& s = r.stats;
  json samples = json::array();
  auto num = [](double v) -> json {
    if (std::isnan(v)) return "nan";
    if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
    return v;
  };
  for (const Mismatch& mm : s.samples) {
    samples.push_back(
        {{"offset", mm.offset}, {"expected", num(mm.expected)}, {"actual", num(mm.actual)}});
  }
  return {{"index", r.index},
          {"name", r.name},
          {"va", r.va},
          {"replay_va", r.replay_va},
          {"kind", r.kind},
          {"size", r.size},
          {"dtype", DTypeName(r.dtype)},
          {"count", s.elements_failing},
          {"elements", s.elements_compared},
          {"elements_differing", s.elements_differing},
          {"bytes_differing", s.bytes_differing},
          {"nan_mismatches", s.nan_mismatches},
          {"worst_abs", num(s.max_abs_error)},
          {"worst_rel", num(s.max_rel_error)},
          {"worst_ulp", s.max_ulp_error},
          {"first_diff_offset", s.first_diff_offset},
          {"first_fail_offset", s.first_fail_offset},
          {"samples", samples}};
}

absl::Status Validate(kerncap_replay* h, const char* options_json, char** report_json) {
  if (report_json == nullptr) {
    return absl::InvalidArgumentError("kerncap_replay_validate: report_json is NULL");
  }
  *report_json = nullptr;
  KC_ASSIGN_OR_RETURN(CompareOptions options,
                      ParseCompareOptions(options_json, h->source->manifest()));
  if (h->session == nullptr) {
    return absl::FailedPreconditionError(
        "kerncap_replay_validate: the replay is not prepared (call kerncap_replay_prepare, "
        "then launch the kernel, then validate)");
  }
  KC_RETURN_IF_ERROR(BindContext(*h));
  KC_ASSIGN_OR_RETURN(ValidationReport report, h->session->CompareWithPostImage(options));
  json j = ValidationJson(report);
  j["pass"] = report.passed();
  json differing = json::array(), within = json::array();
  for (const RegionResult& r : report.regions) {
    if (!r.passed) {
      differing.push_back(RegionDiffJson(r));
    } else if (r.stats.elements_differing > 0) {
      within.push_back(RegionDiffJson(r));
    }
  }
  j["differing"] = std::move(differing);
  j["within_tolerance"] = std::move(within);
  const std::string text = Dump(j);
  char* out = static_cast<char*>(std::malloc(text.size() + 1));
  if (out == nullptr) return absl::ResourceExhaustedError("out of memory for the report");
  std::memcpy(out, text.c_str(), text.size() + 1);
  *report_json = out;
  return absl::OkStatus();
}

// ---- bench -----------------------------------------------------------------

struct CapiBench {
  BenchOptions options;
  bool has_variant = false;
};

absl::StatusOr<CapiBench> ParseBenchOptions(const char* text, const v1::CaptureManifest& m) {
  CapiBench b;
  b.options.iterations = 100;
  b.options.warmup = 10;
  std::optional<bool> compare;
  if (text != nullptr && *text != '\0') {
    const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) {
      return absl::InvalidArgumentError(absl::StrCat("bench options are not JSON: ", text));
    }
    if (!j.is_null() && !j.is_object()) {
      return absl::InvalidArgumentError("bench options must be a JSON object");
    }
    auto integer = [](const json& v, const std::string& key, int64_t lo, int64_t hi,
                      int* out) -> absl::Status {
      if (v.is_null()) return absl::OkStatus();
      if (!v.is_number_integer() || v.get<int64_t>() < lo || v.get<int64_t>() > hi) {
        return absl::InvalidArgumentError(absl::StrCat("bench options: '", key,
                                                       "' must be an integer in ", lo, "..", hi));
      }
      *out = static_cast<int>(v.get<int64_t>());
      return absl::OkStatus();
    };
    if (j.is_object()) {
      for (const auto& [key, v] : j.items()) {
        if (key == "iterations") {
          KC_RETURN_IF_ERROR(integer(v, key, 1, 1000000, &b.options.iterations));
        } else if (key == "warmup") {
          KC_RETURN_IF_ERROR(integer(v, key, 0, 100000, &b.options.warmup));
        } else if (key == "cold_l2") {
          if (v.is_null()) continue;
          if (!v.is_boolean()) {
            return absl::InvalidArgumentError("bench options: 'cold_l2' must be a bool");
          }
          b.options.cold_l2 = v.get<bool>();
        } else if (key == "compare_original") {
          if (v.is_null()) continue;
          if (!v.is_boolean()) {
            return absl::InvalidArgumentError("bench options: 'compare_original' must be a bool");
          }
          compare = v.get<bool>();
        } else if (key == "variant") {
          if (v.is_null()) continue;
          if (!v.is_string() || v.get<std::string>().empty()) {
            return absl::InvalidArgumentError(
                "bench options: 'variant' must be the path of a cubin/PTX/fatbin file, or null");
          }
          b.options.variant_path = v.get<std::string>();
          std::error_code ec;
          if (!fs::is_regular_file(b.options.variant_path, ec)) {
            return absl::NotFoundError(absl::StrCat("bench options: variant ",
                                                    b.options.variant_path, ": no such file"));
          }
          b.has_variant = true;
        } else if (key == "validate") {
          if (v.is_null()) continue;
          absl::StatusOr<CompareOptions> cmp = ParseCompareOptions(v.dump().c_str(), m);
          if (!cmp.ok()) {
            return absl::Status(cmp.status().code(), absl::StrCat("bench options: 'validate': ",
                                                                  cmp.status().message()));
          }
          b.options.compare = *cmp;
        } else {
          return absl::InvalidArgumentError(absl::StrCat(
              "bench options: unknown key '", key,
              "' (iterations, warmup, cold_l2, variant, compare_original, validate)"));
        }
      }
    }
  }
  b.options.compare_original = compare.value_or(b.has_variant);
  // Without a variant the captured binary is timed, whatever the handle loaded.
  b.options.captured = !b.has_variant;
  return b;
}

json StatsJson(const BenchStats& s, const std::string& code_object) {
  json j = BenchStatsJson(s);
  j["code_object"] = code_object;
  return j;
}

json VerdictOf(const std::optional<ValidationReport>& v) {
  if (!v.has_value()) return nullptr;
  return v->verdict();
}

json VerdictDetails(const std::optional<ValidationReport>& before,
                    const std::optional<ValidationReport>& after) {
  if (!before.has_value() && !after.has_value()) return nullptr;
  return {{"before", before ? VerdictJson(*before) : json(nullptr)},
          {"after", after ? VerdictJson(*after) : json(nullptr)}};
}

absl::Status Bench(kerncap_replay* h, const char* options_json, char** report_json) {
  if (report_json == nullptr) {
    return absl::InvalidArgumentError("kerncap_replay_bench: report_json is NULL");
  }
  *report_json = nullptr;
  KC_ASSIGN_OR_RETURN(CapiBench b, ParseBenchOptions(options_json, h->source->manifest()));
  KC_RETURN_IF_ERROR(Prepare(h));
  KC_ASSIGN_OR_RETURN(BenchReport r, h->session->Bench(b.options));
  KC_RETURN_IF_ERROR(BindContext(*h));
  // The session's "kernel" is the binary it timed alone or as the variant;
  // "original" is the captured one beside it.
  const bool variant_timed = b.has_variant || r.compared;
  json variant = nullptr, original = nullptr;
  std::optional<ValidationReport> variant_before, variant_after, original_before, original_after;
  if (variant_timed) {
    variant = StatsJson(r.stats, b.has_variant ? b.options.variant_path : r.comparison.original);
    variant_before = r.kernel_before;
    variant_after = r.kernel_after;
    if (r.compared) {
      original = StatsJson(r.comparison.original_stats, r.comparison.original);
      original_before = r.original_before;
      original_after = r.original_after;
    }
  } else {
    std::string name;
    KC_RETURN_IF_ERROR(h->session->CapturedImage(&name).status());
    original = StatsJson(r.stats, name);
    original_before = r.kernel_before;
    original_after = r.kernel_after;
  }
  json j;
  j["variant"] = variant;
  j["original"] = original;
  j["speedup"] = nullptr;
  j["spread"] = nullptr;
  j["interleave"] = nullptr;
  if (r.compared) {
    const SpeedupStats& sp = r.comparison.speedup;
    auto num = [](double v) -> json {
      if (std::isnan(v)) return "nan";
      if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
      return v;
    };
    j["speedup"] = num(sp.speedup);
    j["spread"] = {{"pairs", sp.pairs},       {"median", num(sp.pair_median)},
                   {"p10", num(sp.pair_p10)}, {"p90", num(sp.pair_p90)},
                   {"min", num(sp.pair_min)}, {"max", num(sp.pair_max)}};
    j["interleave"] = r.comparison.order;
  }
  j["cold_l2"] = r.cold_l2;
  j["l2_flush_bytes"] = r.l2_flush_bytes;
  j["iterations"] = r.stats.iterations;
  j["warmup"] = r.warmup;
  j["restore_each"] = r.restore_each;
  j["protocol"] = r.protocol;
  j["persisting_l2"] = PersistingL2Json(r.persisting_l2);
  j["validated"] = {{"variant", VerdictOf(variant_before)},
                    {"original", VerdictOf(original_before)}};
  j["revalidated"] = {{"variant", VerdictOf(variant_after)},
                      {"original", VerdictOf(original_after)}};
  json changed = json::array();
  for (const RegionResult& c : r.changed_during_timing) {
    changed.push_back({{"index", c.index},
                       {"name", c.name},
                       {"va", c.va},
                       {"kind", c.kind},
                       {"bytes_differing", c.stats.bytes_differing}});
  }
  j["validation"] = {{"variant", VerdictDetails(variant_before, variant_after)},
                     {"original", VerdictDetails(original_before, original_after)},
                     {"changed_during_timing", changed}};
  if (!r.validation_note.empty()) j["validation"]["note"] = r.validation_note;
  j["pass"] = r.verdicts_pass();
  j["replay"] = ReplayInfoJson(r.info);
  const std::string text = Dump(j);
  char* out = static_cast<char*>(std::malloc(text.size() + 1));
  if (out == nullptr) return absl::ResourceExhaustedError("out of memory for the report");
  std::memcpy(out, text.c_str(), text.size() + 1);
  *report_json = out;
  return absl::OkStatus();
}

}  // namespace
}  // namespace kerncap::replay::capi

using namespace kerncap::replay::capi;  // NOLINT: the C entry points below

extern "C" {

kerncap_replay* kerncap_replay_open(const char* capture_path, const char* options_json,
                                    char* err, size_t err_size) {
  std::unique_ptr<kerncap_replay> h;
  const int rc = Guard(err, err_size, [&]() -> absl::Status {
    auto handle = std::make_unique<kerncap_replay>();
    bool verify = false;
    KC_RETURN_IF_ERROR(ParseOpenOptions(options_json, &handle->options, &verify));
    KC_ASSIGN_OR_RETURN(handle->path, ResolveCapturePath(capture_path));
    auto src = kerncap::replay::CaptureSource::OpenKcap(handle->path);
    if (!src.ok()) {
      const std::string msg(src.status().message());
      return absl::Status(src.status().code(),
                          absl::StrContains(msg, handle->path)
                              ? msg
                              : absl::StrCat("capture ", handle->path, ": ", msg));
    }
    handle->source = std::move(*src);
    handle->source->set_verify_content_digests(verify);
    h = std::move(handle);
    return absl::OkStatus();
  });
  return rc == 0 ? h.release() : nullptr;
}

int kerncap_replay_prepare(kerncap_replay* r, char* err, size_t err_size) {
  return Guard(err, err_size, [&]() -> absl::Status {
    KC_RETURN_IF_ERROR(CheckHandle(r, "kerncap_replay_prepare"));
    return Prepare(r);
  });
}

const char* kerncap_replay_info_json(kerncap_replay* r) {
  if (r == nullptr) return nullptr;
  try {
    r->info = Dump(InfoJson(*r));
    return r->info.c_str();
  } catch (...) {
    return nullptr;
  }
}

uint64_t kerncap_replay_translate(kerncap_replay* r, uint64_t captured_va) {
  if (r == nullptr || r->session == nullptr) return 0;
  const kerncap::v1::CaptureManifest& m = r->source->manifest();
  for (int i = 0; i < m.pre().regions_size(); ++i) {
    const kerncap::v1::Region& region = m.pre().regions(i);
    if (captured_va < region.va() || captured_va - region.va() >= region.data().size()) continue;
    const auto p = r->session->placement(static_cast<size_t>(i));
    if (p.restored) return p.replay_va + (captured_va - region.va());
  }
  return 0;
}

int kerncap_replay_launch(kerncap_replay* r, double* ms, char* err, size_t err_size) {
  return Guard(err, err_size, [&]() -> absl::Status {
    KC_RETURN_IF_ERROR(CheckHandle(r, "kerncap_replay_launch"));
    KC_RETURN_IF_ERROR(Prepare(r));
    KC_ASSIGN_OR_RETURN(double t, r->session->Launch());
    if (ms != nullptr) *ms = t;
    return absl::OkStatus();
  });
}

int kerncap_replay_restore_inputs(kerncap_replay* r, char* err, size_t err_size) {
  return Guard(err, err_size, [&]() -> absl::Status {
    KC_RETURN_IF_ERROR(CheckHandle(r, "kerncap_replay_restore_inputs"));
    KC_RETURN_IF_ERROR(Prepare(r));
    return r->session->RestoreWrittenRegions();
  });
}

int kerncap_replay_validate(kerncap_replay* r, const char* options_json, char** report_json,
                            char* err, size_t err_size) {
  return Guard(err, err_size, [&]() -> absl::Status {
    KC_RETURN_IF_ERROR(CheckHandle(r, "kerncap_replay_validate"));
    return Validate(r, options_json, report_json);
  });
}

int kerncap_replay_bench(kerncap_replay* r, const char* options_json, char** report_json,
                         char* err, size_t err_size) {
  return Guard(err, err_size, [&]() -> absl::Status {
    KC_RETURN_IF_ERROR(CheckHandle(r, "kerncap_replay_bench"));
    return Bench(r, options_json, report_json);
  });
}

void kerncap_replay_free(void* p) { std::free(p); }

void kerncap_replay_close(kerncap_replay* r) {
  try {
    delete r;
  } catch (...) {  // destructors do not throw; never let anything cross the C boundary
  }
}

const char* kerncap_replay_version(void) { return ::kerncap::kVersion; }

int kerncap_replay_capi_version(void) { return KERNCAP_REPLAY_CAPI_VERSION; }

}  // extern "C"
