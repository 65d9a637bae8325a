// kerncap-nvrtc's flag table (nvrtc_options.h): translated flags in every
// spelling, dropped host-only flags, refused ones (named, exit 9), usage
// errors (exit 2).
#include "reproducer/nvrtc/nvrtc_options.h"

#include "common/exit_codes.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kerncap::repro::nvrtc {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

ParseResult Parse(std::vector<std::string> flags) {
  std::vector<std::string> args = {"-arch=sm_90"};
  args.insert(args.end(), flags.begin(), flags.end());
  args.insert(args.end(), {"-o", "build/kernel.cubin", "kernel.cu"});
  return ParseCommandLine(args);
}

std::vector<std::string> Options(std::vector<std::string> flags) {
  ParseResult r = Parse(std::move(flags));
  EXPECT_TRUE(r.ok()) << r.error;
  return r.invocation.options;
}

TEST(NvrtcOptions, TheCommandLine) {
  ParseResult r = ParseCommandLine({"--nvcc=/opt/cuda/bin/nvcc", "-arch", "sm_90a", "-o",
                                    "out.cubin", "--nvrtc=/x/libnvrtc.so", "k.cu"});
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.invocation.arch, "sm_90a");
  EXPECT_EQ(r.invocation.output, "out.cubin");
  EXPECT_EQ(r.invocation.source, "k.cu");
  EXPECT_EQ(r.invocation.nvcc, "/opt/cuda/bin/nvcc");
  EXPECT_EQ(r.invocation.nvrtc, "/x/libnvrtc.so");
  EXPECT_THAT(r.invocation.options, IsEmpty());
  r = ParseCommandLine({"--gpu-architecture=sm_120", "--output-file=o.cubin", "k.cu"});
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.invocation.arch, "sm_120");
  EXPECT_EQ(r.invocation.output, "o.cubin");
  EXPECT_TRUE(ParseCommandLine({"--help"}).invocation.help);
}

TEST(NvrtcOptions, PreprocessorFlagsInEverySpelling) {
  EXPECT_THAT(Options({"-DA=1", "-D", "B", "--define-macro=C", "--define-macro", "D", "-D=E"}),
              ElementsAre("-DA=1", "-DB", "-DC", "-DD", "-DE"));
  EXPECT_THAT(Options({"-UX", "-U", "Y", "--undefine-macro=Z"}), ElementsAre("-UX", "-UY", "-UZ"));
  EXPECT_THAT(Options({"-Isrc/a", "-I", "src/b", "--include-path=src/c", "--include-path", "d"}),
              ElementsAre("-Isrc/a", "-Isrc/b", "-Isrc/c", "-Id"));
  EXPECT_THAT(
      Options({"-include", "pre.h", "--pre-include=p2.h", "-std=c++17", "--std", "c++20"}),
      ElementsAre("--pre-include=pre.h", "--pre-include=p2.h", "--std=c++17", "--std=c++20"));
}

TEST(NvrtcOptions, SystemIncludeFoldersComeAfterTheOthers) {
  EXPECT_THAT(Options({"-isystem", "sys1", "-Ia", "--system-include=sys2", "-isystem=sys3", "-Ib"}),
              ElementsAre("-Ia", "-Ib", "-Isys1", "-Isys2", "-Isys3"));
}

TEST(NvrtcOptions, CodeGenerationFlags) {
  EXPECT_THAT(Options({"-G", "--device-debug", "-lineinfo", "--generate-line-info"}),
              ElementsAre("--device-debug", "--device-debug", "--generate-line-info",
                          "--generate-line-info"));
  EXPECT_THAT(Options({"-maxrregcount", "32", "--maxrregcount=64", "-maxrregcount=48"}),
              ElementsAre("--maxrregcount=32", "--maxrregcount=64", "--maxrregcount=48"));
  EXPECT_THAT(Options({"-use_fast_math", "--use_fast_math"}),
              ElementsAre("--use_fast_math", "--use_fast_math"));
  EXPECT_THAT(Options({"--ftz=true", "-ftz", "false", "--prec-div=false", "-prec-sqrt=true",
                       "--fmad", "false"}),
              ElementsAre("--ftz=true", "--ftz=false", "--prec-div=false", "--prec-sqrt=true",
                          "--fmad=false"));
  EXPECT_THAT(Options({"--extra-device-vectorization", "-extra-device-vectorization", "--restrict",
                       "-dopt=on", "-w", "--diag-suppress=177"}),
              ElementsAre("--extra-device-vectorization", "--extra-device-vectorization",
                          "--restrict", "--dopt=on", "--disable-warnings", "--diag-suppress=177"));
}

TEST(NvrtcOptions, PtxasOptionsAreSplitAtCommas) {
  EXPECT_THAT(Options({"-Xptxas", "-v,-O3", "--ptxas-options=--allow-expensive-optimizations=true",
                       "-Xptxas=-dlcm=ca"}),
              ElementsAre("--ptxas-options=-v", "--ptxas-options=-O3",
                          "--ptxas-options=--allow-expensive-optimizations=true",
                          "--ptxas-options=-dlcm=ca"));
}

TEST(NvrtcOptions, HostOnlyFlagsAreDroppedAndNamed) {
  ParseResult r = Parse({"-O3",
                         "-O",
                         "2",
                         "--optimize=1",
                         "-g",
                         "-Xcompiler",
                         "-fPIC",
                         "--compiler-options=-Wall",
                         "-ccbin",
                         "g++-12",
                         "-fPIC",
                         "-m64",
                         "--threads",
                         "4",
                         "-compress-mode=size",
                         "-Wno-deprecated-gpu-targets",
                         "-x",
                         "cu",
                         "-rdc=false",
                         "--expt-relaxed-constexpr",
                         "--extended-lambda",
                         "-forward-unknown-to-host-compiler"});
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_THAT(r.invocation.options, IsEmpty());
  ASSERT_EQ(r.invocation.dropped.size(), 15u);
  EXPECT_EQ(r.invocation.dropped[0], "-O3: host compilation only");
  EXPECT_EQ(r.invocation.dropped[1], "-O 2: host compilation only");
  EXPECT_EQ(r.invocation.dropped[4], "-Xcompiler -fPIC: host compilation only");
  EXPECT_THAT(r.invocation.dropped[12], HasSubstr("--expt-relaxed-constexpr: no NVRTC option"));
}

TEST(NvrtcOptions, UnknownFlagsAreRefusedByName) {
  for (const std::vector<std::string>& f :
       std::vector<std::vector<std::string>>{{"-Xcudafe", "--diag_suppress=1"},
                                             {"--default-stream", "per-thread"},
                                             {"-src-in-ptx"},
                                             {"-Werror"},
                                             {"-t4"},
                                             {"--keep"}}) {
    ParseResult r = Parse(f);
    EXPECT_EQ(r.exit_code, exit_code::kRefused) << f[0];
    EXPECT_THAT(r.error, HasSubstr("refused flag " + f[0] + ":"));
  }
}

TEST(NvrtcOptions, RelocatableDeviceCodeIsRefused) {
  for (const std::vector<std::string>& f :
       std::vector<std::vector<std::string>>{{"-rdc=true"},
                                             {"-rdc", "true"},
                                             {"--relocatable-device-code=true"},
                                             {"-dc"},
                                             {"--device-c"}}) {
    ParseResult r = Parse(f);
    EXPECT_EQ(r.exit_code, exit_code::kRefused) << f[0];
    EXPECT_THAT(r.error, HasSubstr("device link"));
  }
  EXPECT_EQ(Parse({"-rdc=maybe"}).exit_code, exit_code::kUsage);
}

TEST(NvrtcOptions, OtherLanguagesAndVirtualArchitecturesAreRefused) {
  ParseResult r = Parse({"-x", "c++"});
  EXPECT_EQ(r.exit_code, exit_code::kRefused);
  EXPECT_THAT(r.error, HasSubstr("refused flag -x c++"));
  r = ParseCommandLine({"-arch=compute_90", "-o", "o.cubin", "k.cu"});
  EXPECT_EQ(r.exit_code, exit_code::kRefused);
  EXPECT_THAT(r.error, HasSubstr("compute_90"));
}

TEST(NvrtcOptions, UsageErrors) {
  EXPECT_EQ(ParseCommandLine({"-o", "o.cubin", "k.cu"}).exit_code, exit_code::kUsage);   // no arch
  EXPECT_EQ(ParseCommandLine({"-arch=sm_90", "k.cu"}).exit_code, exit_code::kUsage);     // no -o
  EXPECT_EQ(ParseCommandLine({"-arch=sm_90", "-o", "o"}).exit_code, exit_code::kUsage);  // no src
  EXPECT_EQ(ParseCommandLine({"-arch=sm_90", "-o", "o", "a.cu", "b.cu"}).exit_code,
            exit_code::kUsage);
  ParseResult r = Parse({"-I"});
  // "-I" takes the next word ("-o") as its value; the output is then missing.
  EXPECT_EQ(r.exit_code, exit_code::kUsage);
  r = ParseCommandLine({"-arch=sm_90", "-o", "o", "k.cu", "-maxrregcount"});
  EXPECT_EQ(r.exit_code, exit_code::kUsage);
  EXPECT_THAT(r.error, HasSubstr("-maxrregcount needs a value"));
}

}  // namespace
}  // namespace kerncap::repro::nvrtc
