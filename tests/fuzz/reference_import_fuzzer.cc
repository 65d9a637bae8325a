// reference_import_fuzzer.cc: a reference-tool capture folder
// (daemon/import/reference_capture.h) whose JSON files come from the input,
// imported into a sink that keeps nothing. The input is the texts of
// metadata.json, dispatch.json, memory_regions.json and module_variables.json
// separated by "\n--8<--\n" (missing ones are absent files); the folder also
// holds fixed region, kernarg and code object files, a symbolic link and a
// FIFO, so file names from the JSON can point at all of them. Any crash,
// hang, sanitizer report or unbounded allocation is a bug.
#include <sys/stat.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "common/log.h"
#include "daemon/import/reference_capture.h"
#include "tests/fuzz/null_sink.h"

namespace {

void Write(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

struct Folder {
  Folder() {
    kerncap::log::SetMinLevel(kerncap::log::Level::kError);
    // In memory when there is a tmpfs: every input rewrites four files.
    std::string tmpl = ::access("/dev/shm", W_OK) == 0 ? "/dev/shm/kc-ref-fuzz-XXXXXX"
                                                        : "/tmp/kc-ref-fuzz-XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) std::abort();
    dir = tmpl;
    ::mkdir((dir + "/memory").c_str(), 0700);
    Write(dir + "/memory/region_1000.bin", std::string(4096, 'r'));
    Write(dir + "/memory/region_2000.bin", std::string(65536 + 7, '\0'));
    Write(dir + "/kernarg_raw.bin", std::string(64, 'k'));
    Write(dir + "/kernel.hsaco", std::string(100, 'h'));
    Write(dir + "/capture_complete", "ok\n");
    ::mkdir((dir + "/module_variables").c_str(), 0700);
    Write(dir + "/module_variables/v.bin", std::string(16, 'v'));
    (void)!::symlink("/etc/passwd", (dir + "/link").c_str());
    (void)!::mkfifo((dir + "/fifo").c_str(), 0600);
  }
  std::string dir;
};

const char* const kJsonFiles[] = {"metadata.json", "dispatch.json", "memory_regions.json",
                                  "module_variables.json"};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Folder* folder = new Folder();
  static kerncap::fuzz::NullSink* sink = new kerncap::fuzz::NullSink(64u << 10);
  std::vector<std::string> parts =
      absl::StrSplit(std::string(reinterpret_cast<const char*>(data), size), "\n--8<--\n");
  for (size_t i = 0; i < 4; ++i) {
    const std::string path = folder->dir + "/" + kJsonFiles[i];
    if (i < parts.size()) {
      Write(path, parts[i]);
    } else {
      ::unlink(path.c_str());
    }
  }
  (void)kerncap::import::ImportReferenceCapture(folder->dir, *sink);
  return 0;
}
