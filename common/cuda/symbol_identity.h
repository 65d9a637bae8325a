// symbol_identity.h: a name for a module-scope CUDA symbol that survives
// recompiling its translation unit elsewhere.
//
// nvcc gives internal-linkage entities a per-compile "module id" U of the
// form <8 hex digits>_<M>_<file name of M chars, '.' as '_'>_<suffix>; the
// hex part changes with the absolute path of the compiled file (measured with
// nvcc 13.0: the same k.cu from two folders gave bd0d3510 and 082a8982; the
// suffix is the first external kernel's name or a hash of the unit). U
// appears in three shapes, each with a length that bounds it exactly:
//
//   <N>_INTERNAL_<U>        first component of every internal-linkage
//                           variable's mangled name (anonymous namespace,
//                           static members of a named namespace, CCCL's
//                           internal constants)
//                             _ZN30_INTERNAL_bd0d3510_4_k_cu_kern32_GLOBAL__N__bd0d3510_4_k_cu_kern7scale_vE
//   <N>_GLOBAL__N__<U>      an anonymous namespace (variables and kernels)
//                             _ZN32_GLOBAL__N__bd0d3510_4_k_cu_kern11anon_kernelEPi
//   __nv_static_<N>__<U>_   prefix of every internal-linkage symbol with -rdc
//                           (N counts the '_' before U)
//                             __nv_static_21__bd0d3510_4_k_cu_kern_counter
//
// Without -rdc a file-scope `static __device__ int counter;` is just
// "counter" (STB_LOCAL): nothing to normalise.
//
// StableSymbolName replaces each U by a fixed token (and keeps the shape):
//   <N>_INTERNAL_<U>     -> 9_INTERNAL
//   <N>_GLOBAL__N__<U>   -> 12_GLOBAL__N_1   (the usual anonymous namespace)
//   __nv_static_<N>__<U>_ -> __nv_static__
// so two compiles of one unit give equal stable names. A stable name is an
// identity only where it is unique on both sides (two anonymous-namespace
// variables of one name from two units of one linked module collide): the
// matcher checks that. A length prefix that cannot be read unambiguously
// (digits of the preceding name run into it, e.g. namespace v2 then
// 32_GLOBAL__N__...) is resolved with a U seen unambiguously elsewhere in
// the symbol; failing that the component is left as it is (no match rather
// than a wrong one).
#ifndef KERNCAP_COMMON_CUDA_SYMBOL_IDENTITY_H_
#define KERNCAP_COMMON_CUDA_SYMBOL_IDENTITY_H_

#include <string>
#include <string_view>

namespace kerncap::cubin {

// `symbol` with every per-compile uniquifier replaced (see above); `symbol`
// itself when it has none.
std::string StableSymbolName(std::string_view symbol);

// True when StableSymbolName changes `symbol` (it carries a uniquifier).
bool HasCompileUniquifier(std::string_view symbol);

// A stable name without the -rdc wrapper (__nv_static__ + inner -> inner):
// the same variable compiled with and without -rdc. Looser than
// StableSymbolName (an external `counter` of one unit and a static one of
// another become equal), so use it only after StableSymbolName found no
// unique match.
std::string RdcIndependentName(std::string_view stable_name);

}  // namespace kerncap::cubin

#endif  // KERNCAP_COMMON_CUDA_SYMBOL_IDENTITY_H_
