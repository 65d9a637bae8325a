#include "reproducer/replay/cuda/ncu_profile.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "absl/strings/str_join.h"
#include "gtest/gtest.h"

namespace kerncap::replay {
namespace {

// A raw-page CSV as ncu prints it: its own messages, the header, units, one row.
std::string Csv() {
  return R"csv(==PROF== Connected to process 4242 (/usr/bin/kerncap-replay)
capture cap-1: add_one on NVIDIA H200
==PROF== Profiling "add_one": 0%....50%....100% - 9 passes
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","dram__bytes.sum","dram__bytes.sum.peak_sustained","dram__bytes.sum.per_second","dram__cycles_elapsed.avg.per_second","dram__throughput.avg.pct_of_peak_sustained_elapsed","gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed","gpu__time_duration.sum","lts__t_bytes.sum.per_second","lts__throughput.avg.pct_of_peak_sustained_elapsed","sm__cycles_elapsed.avg.per_second","sm__maximum_warps_per_active_cycle_pct","sm__sass_thread_inst_executed_op_dadd_pred_on.sum","sm__sass_thread_inst_executed_op_dfma_pred_on.sum","sm__sass_thread_inst_executed_op_dfma_pred_on.sum.peak_sustained","sm__sass_thread_inst_executed_op_dmul_pred_on.sum","sm__sass_thread_inst_executed_op_fadd_pred_on.sum","sm__sass_thread_inst_executed_op_ffma_pred_on.sum","sm__sass_thread_inst_executed_op_ffma_pred_on.sum.peak_sustained","sm__sass_thread_inst_executed_op_fmul_pred_on.sum","sm__throughput.avg.pct_of_peak_sustained_elapsed","sm__warps_active.avg.pct_of_peak_sustained_active"
"","","","","","","","","","","","byte","byte/cycle","byte/second","cycle/second","%","%","nsecond","byte/second","%","cycle/second","%","inst","inst","inst/cycle","inst","inst","inst","inst/cycle","inst","%","%"
"0","4242","kerncap-replay","h200","add_one","1","13","(256, 1, 1)","(4, 1, 1)","0","9.0","1,048,576","1,536","419,430,400,000","3,000,000,000","8.5","9.25","2,500","800,000,000,000","12.5","1,980,000,000","100","0","0","4,224","0","1000","262,144","16,896","1000","3.1","45.5"
)csv";
}

TEST(NcuProfileTest, ReadsTheFiguresAndTheRooflinePosition) {
  auto f = ParseNcuCsv(Csv());
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->kernel, "add_one");
  EXPECT_EQ(f->grid, "(4, 1, 1)");
  EXPECT_DOUBLE_EQ(*f->duration_ns, 2500);
  EXPECT_DOUBLE_EQ(*f->achieved_occupancy_pct, 45.5);
  EXPECT_DOUBLE_EQ(*f->theoretical_occupancy_pct, 100);
  EXPECT_DOUBLE_EQ(*f->dram_throughput_pct, 8.5);
  EXPECT_DOUBLE_EQ(*f->dram_bytes_per_second, 419430400000.0);
  EXPECT_DOUBLE_EQ(*f->l2_throughput_pct, 12.5);
  EXPECT_DOUBLE_EQ(*f->sm_sol_pct, 3.1);
  EXPECT_DOUBLE_EQ(*f->memory_sol_pct, 9.25);
  // FP32: 2 * 262144 + 1000 + 1000 FLOPs over 1 MiB of DRAM traffic.
  EXPECT_EQ(f->precision, "fp32");
  EXPECT_DOUBLE_EQ(*f->flops, 2 * 262144.0 + 2000);
  EXPECT_DOUBLE_EQ(*f->arithmetic_intensity, (2 * 262144.0 + 2000) / 1048576);
  EXPECT_DOUBLE_EQ(*f->peak_flops_per_second, 16896.0 * 2 * 1.98e9);
  EXPECT_DOUBLE_EQ(*f->peak_dram_bytes_per_second, 1536.0 * 3e9);
  EXPECT_NEAR(*f->ridge_point, 16896.0 * 2 * 1.98e9 / (1536.0 * 3e9), 1e-9);
  EXPECT_EQ(f->bound, "memory");
  EXPECT_EQ(f->metrics.at("gpu__time_duration.sum"), "2,500 nsecond");
  nlohmann::json j = ProfileJson(*f);
  EXPECT_DOUBLE_EQ(j["duration_us"].get<double>(), 2.5);
  EXPECT_EQ(j["roofline"]["bound"], "memory");
  const std::string table = FormatProfile(*f);
  EXPECT_NE(table.find("achieved occupancy (%)"), std::string::npos) << table;
  EXPECT_NE(table.find("memory-bound"), std::string::npos) << table;
}

TEST(NcuProfileTest, AbsentMetricsStayAbsent) {
  auto f = ParseNcuCsv(
      "\"ID\",\"Kernel Name\",\"gpu__time_duration.sum\"\n\"\",\"\",\"nsecond\"\n"
      "\"0\",\"k\",\"n/a\"\n");
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_FALSE(f->duration_ns.has_value());
  EXPECT_FALSE(f->achieved_occupancy_pct.has_value());
  EXPECT_EQ(f->bound, "");
  EXPECT_TRUE(ProfileJson(*f)["duration_us"].is_null());
  EXPECT_NE(FormatProfile(*f).find("n/a"), std::string::npos);
}

TEST(NcuProfileTest, NoLaunchOrNoHeaderIsAnError) {
  EXPECT_FALSE(ParseNcuCsv("==PROF== No kernels were profiled.\n").ok());
  EXPECT_FALSE(ParseNcuCsv("\"ID\",\"Kernel Name\"\n\"\",\"\"\n").ok());
}

TEST(NcuProfileTest, CounterPermissionIsASkip) {
  ProcessResult r;
  r.exit_code = 1;
  r.err = "==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU "
          "Performance Counters";
  ASSERT_TRUE(NcuSkipReason(r).has_value());
  r.err = "==ERROR== something else";
  EXPECT_FALSE(NcuSkipReason(r).has_value());
}

TEST(NcuProfileTest, ArgsNameTheMangledKernelAndTheChild) {
  std::vector<std::string> a = NcuArgs("_Z3fooPf", {"/bin/kerncap-replay", "run", "c.kcap"});
  const std::string s = absl::StrJoin(a, " ");
  EXPECT_NE(s.find("--kernel-name-base mangled --kernel-name _Z3fooPf"), std::string::npos) << s;
  EXPECT_NE(s.find("--launch-count 1"), std::string::npos);
  EXPECT_EQ(a.back(), "c.kcap");
}

TEST(NcuProfileTest, FindsAnExplicitNcuAndRunsProcesses) {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("kc_fake_ncu_" + std::to_string(::getpid())))
          .string();
  std::ofstream(path) << "#!/bin/sh\necho out \"$@\"\necho err >&2\nexit 3\n";
  std::filesystem::permissions(path, std::filesystem::perms::owner_all);
  EXPECT_EQ(FindNcu(path), path);
  EXPECT_FALSE(FindNcu("/nonexistent/ncu").has_value());
  auto r = RunProcess({path, "a", "b"}, 10);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exit_code, 3);
  EXPECT_EQ(r->out, "out a b\n");
  EXPECT_EQ(r->err, "err\n");
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace kerncap::replay
