#include "daemon/import/reference_capture.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <limits>
#include <memory>
#include <optional>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/digest.h"
#include "common/errno_status.h"
#include "common/file_util.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "daemon/import/capture_folder.h"
#include "format/manifest_check.h"
#include "nlohmann/json.hpp"

namespace kerncap::import {
namespace {

using nlohmann::json;

// 4 MiB: the largest store chunk size, hence a multiple of every valid one.
constexpr size_t kPieceBytes = 4u << 20;
// The reference tool caps module variables at 1 GiB.
constexpr uint64_t kMaxModuleVariableBytes = 1ull << 30;

absl::Status Bad(absl::string_view file, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("reference capture: ", file, ": ", what));
}

// JSON files are small (memory_regions.json of a capture with many
// thousands of regions is a few MiB).
constexpr uint64_t kMaxJsonBytes = 64ull << 20;

// Reads one JSON file of the folder.
class JsonFile {
 public:
  static absl::StatusOr<JsonFile> Load(const CaptureFolder& folder, const std::string& name,
                                       bool required) {
    JsonFile f;
    f.name_ = name;
    auto text = folder.ReadFile(name, kMaxJsonBytes);
    if (!text.ok()) {
      if (absl::IsNotFound(text.status()) && !required) return f;
      if (absl::IsNotFound(text.status())) return Bad(name, "missing");
      if (absl::IsInvalidArgument(text.status())) return text.status();
      return Bad(name, text.status().message());
    }
    f.doc_ = json::parse(*text, nullptr, /*allow_exceptions=*/false);
    if (f.doc_.is_discarded()) return Bad(name, "not valid JSON");
    if (!f.doc_.is_object()) return Bad(name, "top level is not a JSON object");
    f.present_ = true;
    return f;
  }
  bool present() const { return present_; }
  const json& doc() const { return doc_; }
  const std::string& name() const { return name_; }

 private:
  std::string name_;
  json doc_;
  bool present_ = false;
};

// A number given as a JSON number or as a string ("0x1f", "31").
std::optional<uint64_t> AsU64(const json& v) {
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (v.is_number_integer()) {
    int64_t i = v.get<int64_t>();
    if (i < 0) return std::nullopt;
    return static_cast<uint64_t>(i);
  }
  if (v.is_boolean()) return v.get<bool>() ? 1 : 0;
  if (v.is_string()) {
    absl::string_view s = absl::StripAsciiWhitespace(v.get_ref<const std::string&>());
    uint64_t out;
    if (absl::ConsumePrefix(&s, "0x") || absl::ConsumePrefix(&s, "0X")) {
      if (absl::SimpleHexAtoi(s, &out)) return out;
      return std::nullopt;
    }
    if (absl::SimpleAtoi(s, &out)) return out;
  }
  return std::nullopt;
}

absl::StatusOr<uint64_t> RequireU64(const json& obj, const std::string& key,
                                    const std::string& file, const std::string& path) {
  if (!obj.is_object() || !obj.contains(key))
    return Bad(file, absl::StrCat("field '", path, "' is missing"));
  auto v = AsU64(obj.at(key));
  if (!v) return Bad(file, absl::StrCat("field '", path, "' is not a non-negative number"));
  return *v;
}

std::optional<uint64_t> OptU64(const json& obj, const std::string& key) {
  if (!obj.is_object() || !obj.contains(key)) return std::nullopt;
  return AsU64(obj.at(key));
}

std::string OptString(const json& obj, const std::string& key) {
  if (obj.is_object() && obj.contains(key) && obj.at(key).is_string()) {
    return obj.at(key).get<std::string>();
  }
  return "";
}

// grid/block as {x,y,z} or [x,y,z].
absl::StatusOr<std::vector<uint32_t>> Dim3(const json& obj, const std::string& key,
                                           const std::string& file) {
  if (!obj.contains(key)) return Bad(file, absl::StrCat("field '", key, "' is missing"));
  const json& v = obj.at(key);
  std::vector<uint32_t> out;
  if (v.is_array()) {
    for (size_t i = 0; i < v.size() && i < 3; ++i) {
      auto n = AsU64(v[i]);
      if (!n || *n > UINT32_MAX)
        return Bad(file, absl::StrCat("field '", key, "[", i, "]' is not a number"));
      out.push_back(static_cast<uint32_t>(*n));
    }
  } else if (v.is_object()) {
    for (const char* axis : {"x", "y", "z"}) {
      if (!v.contains(axis)) {
        if (std::string(axis) == "x")
          return Bad(file, absl::StrCat("field '", key, ".x' is missing"));
        out.push_back(1);
        continue;
      }
      auto n = AsU64(v.at(axis));
      if (!n || *n > UINT32_MAX)
        return Bad(file, absl::StrCat("field '", key, ".", axis, "' is not a number"));
      out.push_back(static_cast<uint32_t>(*n));
    }
  } else {
    return Bad(file, absl::StrCat("field '", key, "' is neither {x,y,z} nor [x,y,z]"));
  }
  while (out.size() < 3) out.push_back(1);
  return out;
}

v1::ArgumentKind KindOf(absl::string_view value_kind) {
  if (absl::StartsWith(value_kind, "hidden_")) return v1::ARG_HIDDEN;
  if (value_kind == "global_buffer" || value_kind == "dynamic_shared_pointer") {
    return v1::ARG_POINTER;
  }
  return v1::ARG_BY_VALUE;  // by_value, image, sampler, pipe, queue, ...
}

// Opens region file `name`, which must be a regular file in the folder
// holding exactly `size` bytes.
absl::StatusOr<std::unique_ptr<CaptureFolder::File>> OpenRegionFile(const CaptureFolder& folder,
                                                                     const std::string& name,
                                                                     uint64_t size) {
  auto file = folder.OpenFile(name);
  if (!file.ok()) {
    if (absl::IsNotFound(file.status())) return Bad(name, "missing (listed in memory_regions.json)");
    return file.status();
  }
  if ((*file)->size() != size) {
    return Bad(name,
               absl::StrCat("has ", (*file)->size(), " bytes but memory_regions.json says ", size));
  }
  return file;
}

// Streams region file `name` (exactly `size` bytes) into region `handle`.
absl::Status StreamFile(const CaptureFolder& folder, const std::string& name, uint64_t size,
                        CaptureIngest& ingest, int handle) {
  KC_ASSIGN_OR_RETURN(std::unique_ptr<CaptureFolder::File> file,
                      OpenRegionFile(folder, name, size));
  const int fd = file->fd();
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  for (uint64_t off = 0; off < size; off += kPieceBytes) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(kPieceBytes, size - off));
    // Owned by the pipeline until it calls on_consumed; backpressure in
    // WriteRegion bounds how many pieces exist at once.
    auto piece = std::make_shared<std::vector<char>>(n);
    KC_RETURN_IF_ERROR(PreadAll(fd, piece->data(), n, off, absl::StrCat("read ", name)));
    KC_RETURN_IF_ERROR(ingest.WriteRegion(handle, off, piece->data(), n, [piece] {}));
  }
  return absl::OkStatus();
}

// The region file for `base`: the reference tool writes region_<hex>.bin;
// accept the usual spellings of the hex base.
std::string RegionFile(const CaptureFolder& folder, const json& region, uint64_t base) {
  std::string explicit_file = OptString(region, "file");
  if (!explicit_file.empty()) return explicit_file;
  for (const std::string& cand : {absl::StrFormat("memory/region_%x.bin", base),
                                  absl::StrFormat("memory/region_0x%x.bin", base),
                                  absl::StrFormat("memory/region_%016x.bin", base),
                                  absl::StrFormat("memory/region_%X.bin", base)}) {
    if (folder.HasFile(cand)) return cand;
  }
  return absl::StrFormat("memory/region_%x.bin", base);
}

absl::StatusOr<std::string> ModuleVariableBytes(const CaptureFolder& folder, const json& var,
                                                const std::string& file, size_t index,
                                                uint64_t size) {
  const std::string field = absl::StrCat("variables[", index, "].blob");
  if (!var.contains("blob") || !var.at("blob").is_string()) {
    return Bad(file, absl::StrCat("field '", field, "' is missing or not a string"));
  }
  if (size > kMaxModuleVariableBytes) {
    return Bad(file, absl::StrCat("variables[", index, "].size ", size, " is more than ",
                                  kMaxModuleVariableBytes));
  }
  const std::string& blob = var.at("blob").get_ref<const std::string&>();
  std::string bytes;
  // A relative path of plain names is a file of the folder (base64 and hex
  // strings are never found as files, or are not plain names at all).
  bool maybe_path = blob.size() < 1024;
  for (absl::string_view part : absl::StrSplit(blob, '/')) {
    maybe_path = maybe_path && IsSafePathComponent(part);
  }
  if (maybe_path) {
    auto content = folder.ReadFile(blob, kMaxModuleVariableBytes);
    if (content.ok()) {
      bytes = std::move(*content);
    } else if (!absl::IsNotFound(content.status())) {
      return Bad(file, absl::StrCat(field, ": ", content.status().message()));
    }
  }
  if (bytes.empty() && size > 0) {
    std::string decoded;
    const bool is_hex = blob.size() % 2 == 0 && std::all_of(blob.begin(), blob.end(), [](char c) {
                          return absl::ascii_isxdigit(static_cast<unsigned char>(c));
                        });
    if (is_hex && blob.size() == 2 * size) {
      decoded = absl::HexStringToBytes(blob);
    } else if (!absl::Base64Unescape(blob, &decoded)) {
      return Bad(file, absl::StrCat("field '", field,
                                    "' is neither a file in the folder, base64 nor hex"));
    }
    bytes = std::move(decoded);
  }
  if (bytes.size() != size) {
    return Bad(file, absl::StrCat("field '", field, "' holds ", bytes.size(), " bytes but size is ",
                                  size));
  }
  return bytes;
}

}  // namespace

absl::StatusOr<std::string> ImportReferenceCapture(const std::string& folder_path,
                                                   CaptureSink& sink) {
  KC_ASSIGN_OR_RETURN(std::unique_ptr<CaptureFolder> folder_ptr, CaptureFolder::Open(folder_path));
  const CaptureFolder& folder = *folder_ptr;
  const format::ManifestLimits limits;
  KC_ASSIGN_OR_RETURN(JsonFile meta, JsonFile::Load(folder, "metadata.json", true));
  KC_ASSIGN_OR_RETURN(JsonFile dispatch, JsonFile::Load(folder, "dispatch.json", true));
  KC_ASSIGN_OR_RETURN(JsonFile regions, JsonFile::Load(folder, "memory_regions.json", true));
  KC_ASSIGN_OR_RETURN(JsonFile modvars, JsonFile::Load(folder, "module_variables.json", false));
  const json& md = meta.doc();
  const json& dp = dispatch.doc();

  v1::CaptureManifest m;
  m.set_format_version(1);
  m.set_source(v1::SOURCE_REFERENCE_IMPORT);
  m.set_post_complete(false);
  (*m.mutable_tags())["kerncap.reference_post_state"] = "true";
  (*m.mutable_tags())["kerncap.reference_complete"] =
      folder.HasFile("capture_complete") ? "true" : "false";

  // Kernel identity.
  v1::KernelIdentity* k = m.mutable_kernel();
  k->set_platform(v1::PLATFORM_HSA);
  std::string demangled = OptString(md, "kernel_name");
  if (demangled.empty()) demangled = OptString(dp, "demangled_name");
  if (absl::EndsWith(demangled, " [clone .kd]")) {
    demangled.resize(demangled.size() - std::string(" [clone .kd]").size());
  }
  std::string mangled = OptString(md, "kernel_symbol");
  if (mangled.empty()) mangled = OptString(dp, "mangled_name");
  if (absl::EndsWith(mangled, ".kd")) mangled.resize(mangled.size() - 3);
  if (demangled.empty() && mangled.empty()) {
    return Bad("metadata.json", "field 'kernel_name' (or 'kernel_symbol') is missing");
  }
  k->set_demangled_name(demangled.empty() ? mangled : demangled);
  k->set_mangled_name(mangled.empty() ? demangled : mangled);
  std::string arch = OptString(md, "gpu_arch");
  if (arch.empty()) arch = OptString(dp, "isa_name");
  if (arch.empty()) return Bad("metadata.json", "field 'gpu_arch' is missing");
  k->set_arch(arch);
  if (md.contains("triton_user_name") || md.contains("constexpr_values")) {
    json jit = json::object();
    if (md.contains("triton_user_name")) jit["triton_user_name"] = md["triton_user_name"];
    if (md.contains("constexpr_values")) jit["constexpr_values"] = md["constexpr_values"];
    k->set_jit_metadata_json(jit.dump());
  }
  m.mutable_device()->set_name(OptString(dp, "agent_name"));
  m.mutable_device()->set_arch(arch);
  m.mutable_driver()->set_tool_version("reference kerncap");
  m.set_dispatch_index(OptU64(dp, "dispatch_index").value_or(0));

  // Launch: HSA grid is in work-items.
  v1::LaunchConfig* launch = m.mutable_launch();
  {
    const json& src_grid = md.contains("grid") ? md : dp;
    const std::string& gfile = md.contains("grid") ? meta.name() : dispatch.name();
    KC_ASSIGN_OR_RETURN(auto grid, Dim3(src_grid, "grid", gfile));
    const json& src_block = md.contains("block") ? md : dp;
    const std::string& bfile = md.contains("block") ? meta.name() : dispatch.name();
    KC_ASSIGN_OR_RETURN(auto block, Dim3(src_block, "block", bfile));
    for (uint32_t g : grid) launch->add_grid(g);
    for (uint32_t b : block) launch->add_block(b);
  }
  uint64_t lds = OptU64(md, "lds_size").value_or(OptU64(dp, "group_segment_size").value_or(0));
  launch->set_shared_mem_bytes(static_cast<uint32_t>(lds));
  launch->set_private_mem_bytes(
      static_cast<uint32_t>(OptU64(dp, "private_segment_size").value_or(0)));
  for (const char* attr : {"sgpr_count", "vgpr_count", "kernarg_segment_size_meta"}) {
    if (auto v = OptU64(md, attr)) (*launch->mutable_attributes())[attr] = static_cast<int64_t>(*v);
  }
  for (const char* attr : {"wavefront_size", "kernarg_size"}) {
    if (auto v = OptU64(dp, attr)) (*launch->mutable_attributes())[attr] = static_cast<int64_t>(*v);
  }

  // Arguments.
  if (md.contains("kernarg_slots")) {
    const json& slots = md.at("kernarg_slots");
    if (!slots.is_array()) return Bad("metadata.json", "field 'kernarg_slots' is not an array");
    for (size_t i = 0; i < slots.size(); ++i) {
      const std::string p = absl::StrCat("kernarg_slots[", i, "]");
      KC_ASSIGN_OR_RETURN(uint64_t off,
                          RequireU64(slots[i], "offset", "metadata.json", p + ".offset"));
      KC_ASSIGN_OR_RETURN(uint64_t size,
                          RequireU64(slots[i], "size", "metadata.json", p + ".size"));
      v1::Argument* a = m.add_arguments();
      a->set_offset(static_cast<uint32_t>(off));
      a->set_size(static_cast<uint32_t>(size));
      a->set_value_kind(OptString(slots[i], "value_kind"));
      a->set_kind(KindOf(a->value_kind()));
      a->set_name(OptString(slots[i], "name"));
      a->set_type_name(OptString(slots[i], "value_type"));
    }
  }
  {
    auto blob = folder.ReadFile("kernarg_raw.bin", limits.max_argument_blob_bytes);
    if (!blob.ok()) {
      if (absl::IsInvalidArgument(blob.status())) return blob.status();
      return Bad("kernarg_raw.bin",
                 absl::IsNotFound(blob.status()) ? "missing" : blob.status().message());
    }
    for (const auto& a : m.arguments()) {
      if (static_cast<uint64_t>(a.offset()) + a.size() > blob->size()) {
        return Bad("metadata.json",
                   absl::StrCat("kernarg slot '", a.name(), "' at offset ", a.offset(),
                                " lies outside kernarg_raw.bin (", blob->size(), " bytes)"));
      }
    }
    m.set_argument_blob(std::move(*blob));
  }

  // Parse the region list completely before streaming anything.
  struct RegionIn {
    v1::Region region;
    std::string file;
  };
  std::vector<RegionIn> region_list;
  const json& rdoc = regions.doc();
  if (!rdoc.contains("regions") || !rdoc.at("regions").is_array()) {
    return Bad("memory_regions.json", "field 'regions' is missing or not an array");
  }
  if (rdoc.at("regions").size() > limits.max_regions) {
    return Bad("memory_regions.json", absl::StrCat(rdoc.at("regions").size(),
                                                   " regions, more than ", limits.max_regions));
  }
  uint64_t total_bytes = 0;
  for (size_t i = 0; i < rdoc.at("regions").size(); ++i) {
    const json& r = rdoc.at("regions")[i];
    const std::string p = absl::StrCat("regions[", i, "]");
    KC_ASSIGN_OR_RETURN(uint64_t base, RequireU64(r, "base", "memory_regions.json", p + ".base"));
    KC_ASSIGN_OR_RETURN(uint64_t size, RequireU64(r, "size", "memory_regions.json", p + ".size"));
    if (size > std::numeric_limits<uint64_t>::max() - base) {
      return Bad("memory_regions.json",
                 absl::StrFormat("region '%s' (base 0x%x, size %d bytes) wraps the 64-bit "
                                 "address space",
                                 p, base, size));
    }
    RegionIn in;
    in.region.set_va(base);
    in.region.set_kind(OptU64(r, "contains_kernarg").value_or(0) ? v1::REGION_KERNARG
                       : OptU64(r, "is_vmem").value_or(0)        ? v1::REGION_DEVICE_VMM
                                                                 : v1::REGION_DEVICE);
    in.region.mutable_data()->set_size(size);
    in.file = RegionFile(folder, r, base);
    // Sizes come from the JSON: checked against the files (and bounded)
    // before the ingest allocates anything for them.
    if (size > limits.max_region_bytes || (total_bytes += size) > limits.max_logical_bytes) {
      return Bad("memory_regions.json", absl::StrCat("field '", p, ".size' (", size,
                                                     " bytes) exceeds the capture limits"));
    }
    KC_RETURN_IF_ERROR(OpenRegionFile(folder, in.file, size).status());
    region_list.push_back(std::move(in));
  }

  // Code object.
  auto hsaco = folder.ReadFile("kernel.hsaco", limits.max_code_object_bytes);
  if (!hsaco.ok()) {
    if (absl::IsInvalidArgument(hsaco.status())) return hsaco.status();
    return Bad("kernel.hsaco",
               absl::IsNotFound(hsaco.status()) ? "missing" : hsaco.status().message());
  }
  const Digest code_digest = Sha256(*hsaco);
  if (std::string want = absl::AsciiStrToLower(OptString(md, "hsaco_sha256")); !want.empty()) {
    if (want != code_digest.ToHex()) {
      return Bad("metadata.json",
                 absl::StrCat("field 'hsaco_sha256' (", want, ") does not match kernel.hsaco (",
                              code_digest.ToHex(), ")"));
    }
  }
  k->set_code_object_digest(code_digest.ToBytes());

  KC_ASSIGN_OR_RETURN(std::unique_ptr<CaptureIngest> ingest, sink.BeginCapture());
  {
    v1::CodeObject co;
    co.set_format(v1::CODE_OBJECT_HSACO);
    co.set_name("kernel.hsaco");
    co.set_digest(code_digest.ToBytes());
    KC_RETURN_IF_ERROR(ingest->AddCodeObject(co, hsaco->data(), hsaco->size()));
    std::string().swap(*hsaco);
  }
  for (const RegionIn& in : region_list) {
    KC_ASSIGN_OR_RETURN(int handle, ingest->AddRegion(ImageKind::kPre, in.region));
    KC_RETURN_IF_ERROR(StreamFile(folder, in.file, in.region.data().size(), *ingest, handle));
  }
  if (modvars.present()) {
    const json& vars = modvars.doc().contains("variables") ? modvars.doc().at("variables") : json();
    if (!vars.is_array()) {
      return Bad("module_variables.json", "field 'variables' is missing or not an array");
    }
    for (size_t i = 0; i < vars.size(); ++i) {
      const std::string p = absl::StrCat("variables[", i, "]");
      KC_ASSIGN_OR_RETURN(uint64_t size,
                          RequireU64(vars[i], "size", "module_variables.json", p + ".size"));
      KC_ASSIGN_OR_RETURN(std::string bytes,
                          ModuleVariableBytes(folder, vars[i], "module_variables.json", i, size));
      v1::Region r;
      r.set_kind(v1::REGION_MODULE_GLOBAL);
      r.set_name(OptString(vars[i], "name"));
      r.set_va(OptU64(vars[i], "address").value_or(OptU64(vars[i], "va").value_or(0)));
      r.mutable_data()->set_size(bytes.size());
      if (bytes.size() > std::numeric_limits<uint64_t>::max() - r.va()) {
        return Bad("module_variables.json",
                   absl::StrFormat("variable '%s' (%s, address 0x%x, size %d bytes) wraps the "
                                   "64-bit address space",
                                   p, r.name(), r.va(), bytes.size()));
      }
      KC_ASSIGN_OR_RETURN(int handle, ingest->AddRegion(ImageKind::kPre, r));
      auto owned = std::make_shared<std::string>(std::move(bytes));
      // Module variables are small (the reference tool caps them at 1 GiB,
      // typical ones are KBs), so one write of the whole variable is fine
      // as long as it is chunk aligned, which offset 0 is.
      KC_RETURN_IF_ERROR(ingest->WriteRegion(handle, 0, owned->data(), owned->size(), [owned] {}));
    }
  }
  KC_ASSIGN_OR_RETURN(std::string id, ingest->Commit(std::move(m)));
  log::Info("capture.reference_imported",
            {{"capture", id}, {"folder", folder_path}, {"regions", region_list.size()}});
  return id;
}

}  // namespace kerncap::import
