// launcher_rank.h: the rank of this process in a parallel job, from the
// environment its launcher sets, for the agent's Hello (link::LauncherRank).
//
// Tried in this order; the first whose rank variable holds a valid rank
// wins, and the local rank and size come from the same launcher:
//   Open MPI     OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_LOCAL_RANK, OMPI_COMM_WORLD_SIZE
//   MVAPICH      MV2_COMM_WORLD_RANK, MV2_COMM_WORLD_LOCAL_RANK, MV2_COMM_WORLD_SIZE
//   PMIx         PMIX_RANK (local rank and size: none in the environment)
//   MPICH/Hydra  PMI_RANK, MPI_LOCALRANKID, PMI_SIZE
//   torchrun     RANK, LOCAL_RANK, WORLD_SIZE
//   Slurm        SLURM_PROCID, SLURM_LOCALID, SLURM_NTASKS
// MPI's own variables come before torchrun's and Slurm's: under `srun
// torchrun ...` SLURM_PROCID numbers the node's launcher, RANK the process.
// A value counts only as a plain decimal in [0, 2^31); a size only when it is
// larger than the rank. Anything else is ignored (the environment is the
// application's, not ours to trust).
#ifndef KERNCAP_AGENT_LINK_LAUNCHER_RANK_H_
#define KERNCAP_AGENT_LINK_LAUNCHER_RANK_H_

#include <functional>

#include "common/agent_link/messages.h"

namespace kerncap::agent {

// `getenv` returns a variable's value or null.
link::LauncherRank LauncherRankFrom(const std::function<const char*(const char*)>& getenv);

// From this process's environment.
link::LauncherRank LauncherRankFromEnv();

}  // namespace kerncap::agent

#endif  // KERNCAP_AGENT_LINK_LAUNCHER_RANK_H_
