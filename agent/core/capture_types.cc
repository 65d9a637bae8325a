#include "agent/core/capture_types.h"

namespace kerncap::agent {

uint64_t CodeObjectKey(const std::string& bytes) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h ^ (static_cast<uint64_t>(bytes.size()) * 0x9e3779b97f4a7c15ull);
}

}  // namespace kerncap::agent
