#include "agent/core/capture_types.h"

#include "agent/core/allocation_table.h"

namespace kerncap::agent {

uint64_t CodeObjectKey(const std::string& bytes) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h ^ (static_cast<uint64_t>(bytes.size()) * 0x9e3779b97f4a7c15ull);
}

uint64_t DispatchShapeKey(link::PerShape mode, const LaunchDesc& launch,
                          std::string_view argument_blob, const AllocationTable& allocations) {
  link::LaunchShapeInputs in;
  in.grid = launch.grid;
  in.block = launch.block;
  in.shared_mem_bytes = launch.shared_mem_bytes;
  in.cluster = launch.cluster;
  if (mode == link::PerShape::kScalars) in.argument_blob = argument_blob;
  return link::LaunchShapeKey(mode, in, [&allocations](uint64_t word) {
    return allocations.Lookup(word).has_value();
  });
}

}  // namespace kerncap::agent
