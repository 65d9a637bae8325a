#include "agent/link/launcher_rank.h"

#include <map>
#include <string>

#include "gtest/gtest.h"

namespace kerncap::agent {
namespace {

link::LauncherRank From(const std::map<std::string, std::string>& env) {
  return LauncherRankFrom([&](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

TEST(LauncherRankTest, NoLauncherMeansUnknown) {
  link::LauncherRank r = From({{"HOME", "/root"}});
  EXPECT_EQ(r.rank, -1);
  EXPECT_EQ(r.local_rank, -1);
  EXPECT_EQ(r.world_size, -1);
  EXPECT_EQ(r.source, "");
}

TEST(LauncherRankTest, OpenMpi) {
  link::LauncherRank r = From({{"OMPI_COMM_WORLD_RANK", "5"},
                               {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                               {"OMPI_COMM_WORLD_SIZE", "8"}});
  EXPECT_EQ(r.rank, 5);
  EXPECT_EQ(r.local_rank, 1);
  EXPECT_EQ(r.world_size, 8);
  EXPECT_EQ(r.source, "OMPI_COMM_WORLD_RANK");
}

TEST(LauncherRankTest, TorchrunUnderSlurmTakesTheProcessRank) {
  // srun torchrun: Slurm numbers the node's launcher, torchrun the process.
  link::LauncherRank r = From({{"SLURM_PROCID", "1"}, {"SLURM_LOCALID", "0"}, {"SLURM_NTASKS", "2"},
                               {"RANK", "11"}, {"LOCAL_RANK", "3"}, {"WORLD_SIZE", "16"}});
  EXPECT_EQ(r.rank, 11);
  EXPECT_EQ(r.local_rank, 3);
  EXPECT_EQ(r.world_size, 16);
  EXPECT_EQ(r.source, "RANK");
}

TEST(LauncherRankTest, SlurmAloneAndPmi) {
  link::LauncherRank s = From({{"SLURM_PROCID", "3"}, {"SLURM_LOCALID", "1"}, {"SLURM_NTASKS", "4"}});
  EXPECT_EQ(s.rank, 3);
  EXPECT_EQ(s.source, "SLURM_PROCID");
  link::LauncherRank p = From({{"PMI_RANK", "2"}, {"PMI_SIZE", "4"}, {"MPI_LOCALRANKID", "0"},
                               {"SLURM_PROCID", "9"}});
  EXPECT_EQ(p.rank, 2);
  EXPECT_EQ(p.world_size, 4);
  EXPECT_EQ(p.local_rank, 0);
  link::LauncherRank x = From({{"PMIX_RANK", "7"}});
  EXPECT_EQ(x.rank, 7);
  EXPECT_EQ(x.world_size, -1);
  EXPECT_EQ(x.source, "PMIX_RANK");
}

TEST(LauncherRankTest, MalformedValuesAreIgnored) {
  // A rank that is not a plain decimal: that launcher is skipped.
  link::LauncherRank r = From({{"OMPI_COMM_WORLD_RANK", "3x"}, {"RANK", "-1"},
                               {"SLURM_PROCID", " 4"}, {"PMI_RANK", "99999999999"}});
  EXPECT_EQ(r.rank, -1);
  // A size not larger than the rank, a local rank beyond the size: dropped.
  link::LauncherRank s = From({{"RANK", "4"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "abc"}});
  EXPECT_EQ(s.rank, 4);
  EXPECT_EQ(s.world_size, -1);
  EXPECT_EQ(s.local_rank, -1);
  link::LauncherRank t = From({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "5"}});
  EXPECT_EQ(t.local_rank, -1);
  link::LauncherRank e = From({{"RANK", ""}});
  EXPECT_EQ(e.rank, -1);
}

}  // namespace
}  // namespace kerncap::agent
