#include "agent/link/kernel_census.h"

#include <set>
#include <string>
#include <utility>

namespace kerncap::agent {
namespace {

// The JSON text of a string's characters ('"' and '\\' are escaped).
size_t JsonChars(const std::string& s) {
  size_t n = s.size();
  for (char c : s) n += c == '"' || c == '\\';
  return n;
}

}  // namespace

bool SendableKernelName(std::string_view s) {
  if (s.size() > link::kMaxKernelNameBytes) return false;
  for (unsigned char c : s) {
    if (c < 0x20 || c >= 0x7f) return false;
  }
  return true;
}

link::KernelsReportMsg KernelsReportPage(const link::KernelsRequestMsg& request,
                                         std::vector<link::LoadedKernelInfo> kernels) {
  link::KernelsReportMsg report;
  report.request_id = request.request_id;
  report.offset = request.offset;
  std::vector<link::LoadedKernelInfo> list;
  std::set<std::pair<std::string, std::string>> seen;
  for (link::LoadedKernelInfo& k : kernels) {
    if (k.mangled_name.empty() || !SendableKernelName(k.mangled_name) || !SendableKernelName(k.demangled_name) ||
        !SendableKernelName(k.module)) {
      ++report.left_out;
      continue;
    }
    if (seen.insert({k.module, k.mangled_name}).second) list.push_back(std::move(k));
  }
  report.total = list.size();
  // {"mangled_name":"","demangled_name":"","module":""}, and the message's own keys.
  constexpr size_t kEntryKeys = 52;
  size_t bytes = 160;
  uint64_t i = request.offset;
  for (; i < list.size() && report.kernels.size() < link::kMaxReportedKernels; ++i) {
    const link::LoadedKernelInfo& k = list[i];
    const size_t entry =
        JsonChars(k.mangled_name) + JsonChars(k.demangled_name) + JsonChars(k.module) + kEntryKeys;
    if (bytes + entry > link::kMaxKernelsReportBytes) break;
    bytes += entry;
    report.kernels.push_back(k);
  }
  report.next_offset = i < list.size() ? i : 0;
  return report;
}

}  // namespace kerncap::agent
