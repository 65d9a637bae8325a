#include "agent/link/launcher_rank.h"

#include <cstdlib>

namespace kerncap::agent {
namespace {

struct Launcher {
  const char* rank;
  const char* local_rank;  // nullptr: none
  const char* size;        // nullptr: none
};

constexpr Launcher kLaunchers[] = {
    {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_SIZE"},
    {"MV2_COMM_WORLD_RANK", "MV2_COMM_WORLD_LOCAL_RANK", "MV2_COMM_WORLD_SIZE"},
    {"PMIX_RANK", nullptr, nullptr},
    {"PMI_RANK", "MPI_LOCALRANKID", "PMI_SIZE"},
    {"RANK", "LOCAL_RANK", "WORLD_SIZE"},
    {"SLURM_PROCID", "SLURM_LOCALID", "SLURM_NTASKS"},
};

// A plain decimal in [0, 2^31), else -1.
int64_t ParseCount(const char* v) {
  if (v == nullptr || *v == '\0') return -1;
  int64_t n = 0;
  for (const char* p = v; *p != '\0'; ++p) {
    if (*p < '0' || *p > '9') return -1;
    n = n * 10 + (*p - '0');
    if (n >= (int64_t{1} << 31)) return -1;
  }
  return n;
}

}  // namespace

link::LauncherRank LauncherRankFrom(const std::function<const char*(const char*)>& getenv) {
  link::LauncherRank r;
  for (const Launcher& l : kLaunchers) {
    const int64_t rank = ParseCount(getenv(l.rank));
    if (rank < 0) continue;
    r.rank = rank;
    r.source = l.rank;
    if (l.local_rank != nullptr) r.local_rank = ParseCount(getenv(l.local_rank));
    if (l.size != nullptr) {
      const int64_t size = ParseCount(getenv(l.size));
      if (size > rank) r.world_size = size;
    }
    if (r.world_size > 0 && r.local_rank >= r.world_size) r.local_rank = -1;
    return r;
  }
  return r;
}

link::LauncherRank LauncherRankFromEnv() {
  return LauncherRankFrom([](const char* name) -> const char* { return std::getenv(name); });
}

}  // namespace kerncap::agent
