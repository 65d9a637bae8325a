// module_symbols.h: which variable of a code object the replay loads is which
// module variable of the capture, and which function is the captured kernel.
//
// The captured module variables are named by their symbols in the
// application's module. A code object rebuilt elsewhere (`make recompile` of
// a reproducer) names internal-linkage ones differently: nvcc's per-compile
// uniquifier changes with the compiled file's path (common/cuda/
// symbol_identity.h). The driver can look a symbol up but not list a
// module's symbols, so they are read from the image's bytes: the ELF symbol
// table of a cubin (also the cubins inside an uncompressed fatbin), the
// module-scope declarations of PTX text.
//
// Matching, per captured variable, in order (each step among what earlier
// steps left unmatched):
//   1. the exact symbol (what the driver finds by name);
//   2. the stable name (uniquifiers normalised), when exactly one captured
//      and exactly one loaded variable have it;
//   3. the same without the -rdc wrapper (a unit built with and without -rdc);
// and in every case the driver's size must equal the captured size. What
// cannot be matched says why (absent, ambiguous, size differs, the image's
// symbols cannot be listed); the verdict names it (report.h NotCompared).
#ifndef KERNCAP_REPRODUCER_REPLAY_CORE_MODULE_SYMBOLS_H_
#define KERNCAP_REPRODUCER_REPLAY_CORE_MODULE_SYMBOLS_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace kerncap::replay {

struct ModuleSymbols {
  std::string format;  // "cubin", "fatbin", "ptx", "unknown"
  // False when the image's symbols could not be read (a compressed fatbin,
  // an unknown format): only exact names can be looked up.
  bool listed = false;
  std::vector<std::string> variables;  // module-scope __device__/__constant__ (defined here)
  std::vector<std::string> kernels;
};

// Reads the symbol names of a code image (cubin, fatbin, or PTX text with or
// without its terminating NUL). Never fails: an unreadable image gives
// listed = false.
ModuleSymbols ListModuleSymbols(std::string_view image);

struct CapturedVariable {
  size_t region = 0;  // pre-image region index
  std::string name;   // symbol in the application's module
  uint64_t size = 0;
};

struct VariableMatch {
  size_t region = 0;
  std::string captured;  // the captured symbol
  std::string symbol;    // the loaded module's symbol; empty when unmatched
  // How it was matched: "exact", "stable name", "stable name (-rdc independent)".
  std::string how;
  std::string problem;   // unmatched: why (for the verdict)
  // Unmatched because the loaded module does not define it at all (its
  // symbols were listed and neither the name nor the stable name is there):
  // the loaded kernel cannot name it, so only a pointer can reach it
  // (pointer_scan.h). False for ambiguous and size problems.
  bool absent = false;
  bool matched() const { return !symbol.empty(); }
};

// The size of `symbol` in the loaded module (cuModuleGetGlobal), nullopt
// when the module has no such symbol.
using SymbolSizeLookup = std::function<std::optional<uint64_t>(const std::string& symbol)>;

// One result per captured variable, in the order given.
std::vector<VariableMatch> MatchModuleVariables(const std::vector<CapturedVariable>& captured,
                                                const ModuleSymbols& loaded,
                                                const SymbolSizeLookup& size_of);

// One line for the matches that were not exact ("" when all were): how
// many captured variables have another name in `where`, the first few as
// 'captured' -> 'loaded'. A rebuilt module with CCCL's internal objects has
// dozens: one warning, not dozens.
std::string DescribeRenamedVariables(const std::vector<VariableMatch>& matches,
                                     const std::string& where);

// The loaded module's name for the captured kernel `mangled`, which the
// driver did not find by its exact name: the one kernel with its stable name
// (an anonymous-namespace kernel rebuilt elsewhere). NotFound naming the
// kernels that are there otherwise.
absl::StatusOr<std::string> MatchKernel(const std::string& mangled, const ModuleSymbols& loaded);

}  // namespace kerncap::replay

#endif  // KERNCAP_REPRODUCER_REPLAY_CORE_MODULE_SYMBOLS_H_
