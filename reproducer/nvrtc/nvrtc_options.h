// nvrtc_options.h: kerncap-nvrtc's command line: nvcc's flags (as a
// reproducer's FLAGS records them) translated into NVRTC options.
//
//   kerncap-nvrtc -arch=sm_90 [nvcc flags...] -o OUT.cubin SRC.cu
//                 [--nvcc=PATH] [--nvrtc=LIBNVRTC]
//
// Every nvcc flag is in one table (nvrtc_options.cc), in its short and long
// spellings ("-x y", "-x=y", "--x=y", "--x y"; -D/-U/-I/-O also joined) and
// with one of three fates:
//   translated  it changes the device code, and NVRTC has the same option
//               (-D -U -I -include -std -G -lineinfo -maxrregcount
//               --use_fast_math --ftz --prec-div --prec-sqrt --fmad -Xptxas
//               --extra-device-vectorization --restrict --dopt ...)
//   dropped     it only affects what NVRTC does not do (host compilation,
//               the fatbinary, nvcc's own driver), or NVRTC has no such
//               option and needs none for the code a minimal unit holds
//               (Invocation::dropped says which, and why)
//   refused     anything else: the tool will not guess (exit_code::kRefused,
//               a message naming the flag); so is relocatable device code
//               (-rdc=true, -dc: a device link NVRTC alone does not do)
// What is compiled is only trusted through the generator's fingerprint
// comparison with nvcc's build (minimal_unit.h); the table keeps that
// comparison from being the only guard.
#ifndef KERNCAP_REPRODUCER_NVRTC_NVRTC_OPTIONS_H_
#define KERNCAP_REPRODUCER_NVRTC_NVRTC_OPTIONS_H_

#include <string>
#include <vector>

namespace kerncap::repro::nvrtc {

struct Invocation {
  std::string arch;    // "sm_90": NVRTC makes a CUBIN for it
  std::string output;  // -o
  std::string source;  // the one positional argument
  std::string nvcc;    // --nvcc=PATH: the toolkit whose libnvrtc is used
  std::string nvrtc;   // --nvrtc=PATH: libnvrtc itself (else $KERNCAP_NVRTC)
  // NVRTC options translated from the nvcc flags, in their order; -isystem
  // folders come last, as -I (NVRTC has no system include folders; nvcc
  // searches them after the -I ones).
  std::vector<std::string> options;
  // "FLAG: why" for every nvcc flag left out.
  std::vector<std::string> dropped;
  bool help = false;
};

struct ParseResult {
  Invocation invocation;
  int exit_code = 0;  // 0, or exit_code::kUsage / kRefused
  std::string error;  // one line naming the flag when exit_code != 0
  bool ok() const { return exit_code == 0; }
};

// args: the command line without argv[0].
ParseResult ParseCommandLine(const std::vector<std::string>& args);

}  // namespace kerncap::repro::nvrtc

#endif  // KERNCAP_REPRODUCER_NVRTC_NVRTC_OPTIONS_H_
