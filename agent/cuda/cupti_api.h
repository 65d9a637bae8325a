// cupti_api.h: CUPTI loaded at run time, the copy that fits the driver.
//
// The agent has no link dependency on libcupti: it looks for the CUPTI whose
// major version is the driver's (libcupti.so.13 for a CUDA 13 driver), then
// older majors down to 12 (a CUDA 13 driver runs CUDA 12 tools), never a newer
// one (it refuses to run on an older driver). Where it looks, in this order:
//
//   1. KERNCAP_AGENT_CUPTI: a libcupti file, or a folder holding
//      libcupti.so.<major>. Set, it is the only place looked at.
//   2. A CUPTI the process has loaded already (a profiler, PyTorch's Kineto):
//      one process cannot use two.
//   3. Beside the CUDA libraries the process has loaded: the pip wheels'
//      nvidia/cuda_cupti/lib (CUDA 12 wheels) and nvidia/cu13/lib (CUDA 13),
//      a toolkit's extras/CUPTI/lib64 and lib64.
//   4. The pip wheels of the active Python environments: $VIRTUAL_ENV,
//      $CONDA_PREFIX, $PYTHONPATH entries.
//   5. The dynamic linker's search ($LD_LIBRARY_PATH, ld.so.cache).
//   6. Toolkits: $CUDA_HOME, $CUDA_PATH, /usr/local/cuda-<major>*, /usr/local/cuda.
//
// Under LD_PRELOAD the search runs in the library constructor, before a
// Python application has imported its CUDA wheels (3 then finds nothing);
// CUDA_INJECTION64_PATH runs it inside cuInit, when they are loaded.
#ifndef KERNCAP_AGENT_CUDA_CUPTI_API_H_
#define KERNCAP_AGENT_CUDA_CUPTI_API_H_

#include <cupti.h>

#include <string>
#include <vector>

namespace kerncap::agent::cuda {

#define KC_AGENT_CUPTI_FUNCTIONS(X)                                                    \
  X(cuptiSubscribe) X(cuptiUnsubscribe) X(cuptiEnableCallback) X(cuptiEnableDomain)    \
  X(cuptiGetResultString) X(cuptiGetVersion) X(cuptiGetDeviceId)

struct CuptiApi {
#define KC_AGENT_CUPTI_DECLARE(name) decltype(&::name) name = nullptr;
  KC_AGENT_CUPTI_FUNCTIONS(KC_AGENT_CUPTI_DECLARE)
#undef KC_AGENT_CUPTI_DECLARE
  // CUPTI 13 (names an earlier subscriber when CUPTI is taken); null before.
  decltype(&::cuptiSubscribe_v2) cuptiSubscribe_v2 = nullptr;

  std::string path;  // the file loaded
  int major = 0;     // its CUDA major version (the soname's)
};

// Where to look (see the header comment); the inputs come from the process.
struct CuptiSearch {
  int driver_major = 0;
  std::string override_path;                 // KERNCAP_AGENT_CUPTI
  std::vector<std::string> loaded_libraries;  // paths of the loaded shared objects
  std::vector<std::string> python_prefixes;   // $VIRTUAL_ENV, $CONDA_PREFIX
  std::vector<std::string> python_paths;      // $PYTHONPATH entries
  std::vector<std::string> toolkit_roots;     // $CUDA_HOME, $CUDA_PATH
};

struct CuptiCandidate {
  std::string path;  // a file path, a glob(3) pattern, or a bare soname (linker search)
  int major = 0;
};

// The candidates in the order they are tried. A bare soname has no '/'.
std::vector<CuptiCandidate> CuptiCandidates(const CuptiSearch& search);

// The CUDA major of a CUPTI file name: 13 for ".../libcupti.so.13" or
// "libcupti.so.13.0.85"; 0 when the name carries none.
int CuptiMajorOf(const std::string& path);

// The search inputs of this process (environment, loaded objects).
CuptiSearch CuptiSearchFromProcess(int driver_major);

// Finds and loads CUPTI once per process. False when none fits; *why then
// says what was looked for and where.
bool LoadCuptiApi(int driver_major, std::string* why);

// The table LoadCuptiApi filled (only valid after it succeeded).
const CuptiApi& Cupti();

}  // namespace kerncap::agent::cuda

#endif  // KERNCAP_AGENT_CUDA_CUPTI_API_H_
