// kcap_file_fuzzer.cc: a .kcap capture file (kcap_file.h) through both of its
// readers: the record reader kerncapctl import streams from, and the
// indexing reader kerncap-replay and `kerncapctl repro FILE` restore from
// (CaptureSource: record index, chunk records walked in the protobuf wire
// format without copying, verified chunk reads). Every chunk the manifest
// names is read back. Any crash, sanitizer report or huge allocation is a
// bug: the file may come from anywhere.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "format/kcap_file.h"
#include "common/log.h"
#include "format/manifest_check.h"
#include "reproducer/replay/core/capture_source.h"

namespace {

// The input as a file: a memfd, named through /proc/self/fd.
class MemFile {
 public:
  MemFile(const uint8_t* data, size_t size) : fd_(::memfd_create("kcap-fuzz", MFD_CLOEXEC)) {
    if (fd_ >= 0 && size > 0) (void)!::write(fd_, data, size);
  }
  ~MemFile() {
    if (fd_ >= 0) ::close(fd_);
  }
  std::string path() const { return "/proc/self/fd/" + std::to_string(fd_); }
  bool ok() const { return fd_ >= 0; }

 private:
  int fd_;
};

void ReadAll(const kerncap::replay::CaptureSource& src, const kerncap::v1::ChunkList& list,
             const kerncap::v1::Region* region) {
  std::string chunk;
  const uint64_t n = kerncap::format::ChunkCount(list);
  for (int i = 0; i < list.chunk_digests_size(); ++i) {
    uint64_t index = static_cast<uint64_t>(i);
    if (region != nullptr && region->diff()) index = region->changed_chunks(i);
    if (index >= n) __builtin_trap();  // validated: cannot happen
    (void)src.ReadChunk(list.chunk_digests(i), kerncap::format::ChunkLength(list, index), &chunk);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool quiet = [] {
    kerncap::log::SetMinLevel(kerncap::log::Level::kError);
    return true;
  }();
  (void)quiet;
  MemFile file(data, size);
  if (!file.ok()) return 0;
  // 1. The streaming reader (import): every record, checksummed.
  auto reader = kerncap::kcap::KcapReader::Open(file.path());
  if (reader.ok()) {
    kerncap::v1::TransferFrame frame;
    for (int i = 0; i < 100000; ++i) {
      auto more = (*reader)->Next(&frame);
      if (!more.ok() || !*more) break;
      if (frame.has_manifest()) (void)kerncap::format::ValidateManifest(frame.manifest());
    }
  }
  // 2. The indexing reader (replay, local repro) and its chunk reads.
  auto src = kerncap::replay::CaptureSource::OpenKcap(file.path());
  if (!src.ok()) return 0;
  const kerncap::v1::CaptureManifest& m = (*src)->manifest();
  for (const auto& r : m.pre().regions()) ReadAll(**src, r.data(), &r);
  for (const auto& r : m.post().regions()) ReadAll(**src, r.data(), &r);
  for (const auto& c : m.code_objects()) ReadAll(**src, c.data(), nullptr);
  return 0;
}
