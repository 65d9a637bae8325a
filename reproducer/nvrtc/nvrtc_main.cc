// kerncap-nvrtc: compiles one CUDA source to a CUBIN with NVRTC, taking
// nvcc's flags: the fast compiler of a reproducer's `make recompile` of the
// minimal unit (minimal_unit.h; the generator uses it only when the kernel it
// builds is identical to nvcc's). One process, no cudafe++/cicc/ptxas
// spawns and no host-side front end: ~0.1-0.2 s where nvcc -cubin takes
// ~1-2 s on a small unit.
//
//   kerncap-nvrtc -arch=sm_NN [nvcc flags...] -o OUT.cubin SRC.cu
//                 [--nvcc=PATH] [--nvrtc=LIBNVRTC]
//
// Flags: nvrtc_options.h (translated, dropped or refused). NVRTC:
// nvrtc_library.h (which libnvrtc, loaded at run time). NVRTC is given, after
// the translated options: -I<toolkit>/include and -I<toolkit>/include/cccl
// (nvcc's own include folders, searched after the user's), and
// -default-device, because NVRTC (CUDA 13) rejects every function without an
// execution space annotation ("host functions are not allowed in JIT mode");
// in a minimal unit those are the constexpr functions the kernel calls
// (nvcc --expt-relaxed-constexpr compiles them for the device too). The C and
// C++ standard headers a kernel's declarations need (<cstdint>, <climits>,
// ...), which NVRTC lacks, come from std_headers.h.
// Automatic precompiled headers (-pch) are not used: NVRTC ties a PCH file to
// the heap address of the library instance that made it (warning #20282 in
// any later process), so a one-shot compile only pays for writing it.
//
// The CUBIN is written atomically (tmp + rename): a failed compile leaves
// the previous one. NVRTC's log (warnings, errors) goes to stderr.
//
// Exit status (common/exit_codes.h): 0 written; 1 NVRTC rejected the source
// (its log above) or another error; 2 usage; 3 no usable libnvrtc, or the
// source cannot be read; 9 refused: a flag kerncap-nvrtc does not know to
// build the same device code as nvcc (the message names it; nvcc stays the
// compiler).
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/exit_codes.h"
#include "common/file_util.h"
#include "reproducer/nvrtc/nvrtc_library.h"
#include "reproducer/nvrtc/nvrtc_options.h"
#include "reproducer/nvrtc/std_headers.h"

namespace {

namespace nv = kerncap::repro::nvrtc;
namespace exit_code = kerncap::exit_code;

constexpr char kUsage[] =
    "usage: kerncap-nvrtc -arch=sm_NN [nvcc flags...] -o OUT.cubin SRC.cu\n"
    "                     [--nvcc=PATH] [--nvrtc=LIBNVRTC]\n"
    "  nvcc flags: -D -U -I -isystem -include -std -G -lineinfo -maxrregcount --use_fast_math\n"
    "  --ftz --prec-div --prec-sqrt --fmad -Xptxas --extra-device-vectorization --restrict\n"
    "  --dopt -w --diag-suppress; host-only ones (-O -g -Xcompiler -ccbin ...) are dropped;\n"
    "  any other is refused (exit 9), as is -rdc=true. libnvrtc: --nvrtc, $KERNCAP_NVRTC, or\n"
    "  the one beside nvcc (--nvcc, else nvcc on PATH, else /usr/local/cuda/bin/nvcc).\n";

int Fail(int code, const std::string& msg) {
  std::fprintf(stderr, "kerncap-nvrtc: %s\n", msg.c_str());
  return code;
}

std::string ErrorName(const nv::NvrtcApi& api, int rc) {
  const char* s = api.GetErrorString(rc);
  return s != nullptr ? s : absl::StrCat("error ", rc);
}

}  // namespace

int main(int argc, char** argv) {
  const nv::ParseResult parsed =
      nv::ParseCommandLine(std::vector<std::string>(argv + 1, argv + argc));
  if (parsed.invocation.help) {
    std::fputs(kUsage, stdout);
    return exit_code::kOk;
  }
  if (!parsed.ok()) {
    if (parsed.exit_code == exit_code::kUsage) std::fputs(kUsage, stderr);
    return Fail(parsed.exit_code, parsed.error);
  }
  const nv::Invocation& inv = parsed.invocation;
  auto source = kerncap::ReadFile(inv.source);
  if (!source.ok()) {
    return Fail(exit_code::kNotFound,
                absl::StrCat("cannot read ", inv.source, ": ", source.status().message()));
  }
  auto api = nv::LoadNvrtc(nv::NvrtcCandidates(inv.nvrtc, std::getenv("KERNCAP_NVRTC"), inv.nvcc));
  if (!api.ok()) return Fail(exit_code::kNotFound, std::string(api.status().message()));

  std::vector<std::string> options = {"-arch=" + inv.arch};
  options.insert(options.end(), inv.options.begin(), inv.options.end());
  if (!api->include_dir.empty()) {
    options.push_back("-I" + api->include_dir);
    std::error_code ec;
    if (std::filesystem::exists(api->include_dir + "/cccl", ec)) {
      options.push_back("-I" + api->include_dir + "/cccl");
    }
  }
  options.push_back("-default-device");
  std::vector<const char*> argv_options;
  for (const std::string& o : options) argv_options.push_back(o.c_str());

  // The standard headers NVRTC lacks, in memory (std_headers.h).
  std::vector<const char*> header_texts, header_names;
  for (const nv::BuiltinHeader& h : nv::StdHeaders()) {
    header_names.push_back(h.name);
    header_texts.push_back(h.text);
  }
  nv::NvrtcApi::Program prog = nullptr;
  // The program's name is the path as given, as nvcc names the file in
  // __FILE__, diagnostics and line info; quoted includes resolve beside it.
  int rc = api->CreateProgram(&prog, source->c_str(), inv.source.c_str(),
                              static_cast<int>(header_names.size()), header_texts.data(),
                              header_names.data());
  if (rc != 0) return Fail(exit_code::kError, "nvrtcCreateProgram: " + ErrorName(*api, rc));
  rc = api->CompileProgram(prog, static_cast<int>(argv_options.size()), argv_options.data());
  size_t log_size = 0;
  if (api->GetProgramLogSize(prog, &log_size) == 0 && log_size > 1) {
    std::string log(log_size, '\0');
    if (api->GetProgramLog(prog, log.data()) == 0) {
      log.resize(log_size - 1);  // the size counts the terminating NUL
      std::fputs(log.c_str(), stderr);
      if (!log.empty() && log.back() != '\n') std::fputc('\n', stderr);
    }
  }
  if (rc != 0) {
    api->DestroyProgram(&prog);
    return Fail(exit_code::kError, absl::StrCat("NVRTC (", api->path, ") rejected ", inv.source,
                                                ": ", ErrorName(*api, rc)));
  }
  size_t size = 0;
  std::string cubin;
  rc = api->GetCUBINSize(prog, &size);
  if (rc == 0) {
    cubin.resize(size);
    rc = api->GetCUBIN(prog, cubin.data());
  }
  api->DestroyProgram(&prog);
  if (rc != 0 || size == 0) {
    return Fail(exit_code::kError, "no CUBIN from NVRTC: " + ErrorName(*api, rc));
  }
  if (auto w = kerncap::WriteFileAtomic(inv.output, cubin); !w.ok()) {
    return Fail(exit_code::kError, absl::StrCat("cannot write ", inv.output, ": ", w.message()));
  }
  return exit_code::kOk;
}
