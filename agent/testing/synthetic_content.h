// synthetic_content.h: deterministic "device memory" for the synthetic test
// agent, so a test can regenerate exactly what the agent sent and compare it
// with what the store returns. Std-only.
//
// A region is cut into 64 KiB blocks. Each block's kind is picked from a hash
// of (seed, region, block): all zeros (never stored), bf16-like values (what
// weights look like), a repeat of one seed-wide block (dedups), or random
// bytes (incompressible). A quarter of the blocks are "mutable": their content
// also depends on `version`, which is how an in-place kernel is simulated:
// dispatch i's pre-image is version i, its post-image version i+1 (--mutate).
#ifndef KERNCAP_AGENT_TESTING_SYNTHETIC_CONTENT_H_
#define KERNCAP_AGENT_TESTING_SYNTHETIC_CONTENT_H_

#include <cstdint>
#include <string>

namespace kerncap::agent::testing {

inline constexpr uint64_t kSyntheticBlock = 64 * 1024;

// Writes bytes [offset, offset+size) of region `region` into `out`.
void FillSynthetic(uint64_t seed, uint32_t region, uint64_t version, uint64_t offset,
                   uint64_t size, uint8_t* out);
std::string SyntheticBytes(uint64_t seed, uint32_t region, uint64_t version, uint64_t size);

// The fake VA of region `region` (distinct, 4 GiB apart, page aligned).
inline uint64_t SyntheticVa(uint32_t region) { return 0x7f0000000000ull + (uint64_t{region} << 32); }

// Fake mangled name for a kernel name ("_Z<len><name>v").
std::string SyntheticMangled(const std::string& kernel);

}  // namespace kerncap::agent::testing

#endif  // KERNCAP_AGENT_TESTING_SYNTHETIC_CONTENT_H_
