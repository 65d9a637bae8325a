#include "reproducer/generator/amdgpu_asm.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"

namespace kerncap::repro {
namespace {

// A module laid out as clang 15's -S output for gfx90a is: a device
// function, two kernels in .text (descriptor inside the function range), a
// kernel in its own section, a variable, the metadata note.
constexpr const char* kModule = R"(	.text
	.amdgcn_target "amdgcn-amd-amdhsa--gfx90a:xnack-"
	.p2align	2                               ; -- Begin function helper
	.type	helper,@function
helper:                                 ; @helper
	v_fma_f32 v0, v0, s4, 1.0
	s_setpc_b64 s[30:31]
.Lfunc_end0:
	.size	helper, .Lfunc_end0-helper
                                        ; -- End function
	.section	.AMDGPU.csdata
; Function info:
; NumVgprs: 1
	.text
	.protected	scale                   ; -- Begin function scale
	.globl	scale
	.p2align	8
	.type	scale,@function
scale:                                  ; @scale
; %bb.0:
	s_load_dwordx4 s[4:7], s[4:5], 0x0
	v_add_u32_e32 v0, s4, v0
	global_store_dword v[2:3], v0, off
	s_endpgm
	.section	.rodata,#alloc
	.p2align	6
	.amdhsa_kernel scale
		.amdhsa_kernarg_size 24
		.amdhsa_next_free_vgpr 4
		.amdhsa_next_free_sgpr 33
		.amdhsa_accum_offset 4
	.end_amdhsa_kernel
	.text
.Lfunc_end1:
	.size	scale, .Lfunc_end1-scale
                                        ; -- End function
	.section	.AMDGPU.csdata
; Kernel info:
; NumVgprs: 4
	.text
	.protected	other                   ; -- Begin function other
	.globl	other
	.p2align	8
	.type	other,@function
other:                                  ; @other
	v_mov_b32_e32 v4, 0
	s_endpgm
	.section	.rodata,#alloc
	.p2align	6
	.amdhsa_kernel other
		.amdhsa_next_free_vgpr 5
		.amdhsa_next_free_sgpr 33
		.amdhsa_accum_offset 8
	.end_amdhsa_kernel
	.text
.Lfunc_end2:
	.size	other, .Lfunc_end2-other
                                        ; -- End function
	.section	.text._Z4tmplIiEvPT_,#alloc,#execinstr
	.protected	_Z4tmplIiEvPT_          ; -- Begin function _Z4tmplIiEvPT_
	.globl	_Z4tmplIiEvPT_
	.p2align	8
	.type	_Z4tmplIiEvPT_,@function
_Z4tmplIiEvPT_:                         ; @_Z4tmplIiEvPT_
	s_endpgm
	.section	.rodata,#alloc
	.p2align	6
	.amdhsa_kernel _Z4tmplIiEvPT_
		.amdhsa_next_free_vgpr 2
		.amdhsa_next_free_sgpr 6
		.amdhsa_accum_offset 4
	.end_amdhsa_kernel
	.section	.text._Z4tmplIiEvPT_,#alloc,#execinstr
.Lfunc_end3:
	.size	_Z4tmplIiEvPT_, .Lfunc_end3-_Z4tmplIiEvPT_
                                        ; -- End function
	.type	gval,@object
	.section	.bss,#alloc,#write
	.globl	gval
gval:
	.zero	64
	.size	gval, 64
	.amdgpu_metadata
---
amdhsa.kernels:
  - .agpr_count:     0
    .args:
      - .name:           out
        .offset:         0
        .size:           8
        .value_kind:     global_buffer
    .name:           scale
    .sgpr_count:     39
    .symbol:         scale.kd
    .vgpr_count:     4
  - .agpr_count:     0
    .args:
      - .offset:         0
        .size:           8
        .value_kind:     global_buffer
    .name:           other
    .sgpr_count:     39
    .symbol:         other.kd
    .vgpr_count:     5
  - .agpr_count:     0
    .name:           _Z4tmplIiEvPT_
    .sgpr_count:     6
    .symbol:         _Z4tmplIiEvPT_.kd
    .vgpr_count:     2
amdhsa.target:   amdgcn-amd-amdhsa--gfx90a:xnack-
amdhsa.version:
  - 1
  - 1
...

	.end_amdgpu_metadata
)";

std::vector<std::string> Lines() { return SplitLines(kModule); }

size_t LineOf(const std::string& needle) {
  std::vector<std::string> l = Lines();
  for (size_t i = 0; i < l.size(); ++i) {
    if (absl::StrContains(l[i], needle)) return i;
  }
  ADD_FAILURE() << needle;
  return 0;
}

TEST(AmdgpuAsmTest, LocatesFunctionAndMetadataItem) {
  auto parts = LocateKernel(Lines(), "scale");
  ASSERT_TRUE(parts.ok()) << parts.status();
  ASSERT_EQ(parts->size(), 2u);
  EXPECT_EQ((*parts)[0].kind, "function");
  // From the section switch above `.protected scale` to `; -- End function`.
  EXPECT_EQ((*parts)[0].begin, LineOf("-- Begin function scale") - 1);
  EXPECT_EQ((*parts)[0].end, LineOf(".size\tscale,") + 2);
  EXPECT_EQ((*parts)[1].kind, "metadata");
  EXPECT_EQ((*parts)[1].begin, LineOf("- .agpr_count"));
  EXPECT_EQ((*parts)[1].end, LineOf(".name:           other") - 5);

  // The last metadata item ends at amdhsa.target; a kernel in its own section.
  parts = LocateKernel(Lines(), "_Z4tmplIiEvPT_");
  ASSERT_TRUE(parts.ok()) << parts.status();
  EXPECT_EQ((*parts)[0].begin, LineOf(".section\t.text._Z4tmplIiEvPT_"));
  EXPECT_EQ((*parts)[1].end, LineOf("amdhsa.target:"));

  auto missing = LocateKernel(Lines(), "nope");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(missing.status().message(), "scale, other, _Z4tmplIiEvPT_"))
      << missing.status();
  auto fn = LocateKernel(Lines(), "helper");
  EXPECT_FALSE(fn.ok());
  EXPECT_TRUE(absl::StrContains(fn.status().message(), "not a kernel")) << fn.status();
}

TEST(AmdgpuAsmTest, ExtractHoldsOnlyTheKernel) {
  auto text = ExtractKernel(kModule, "scale", "build/module.s");
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_TRUE(absl::StrContains(*text, ";;kerncap-begin function scale\n\t.text\n"
                                       "\t.protected\tscale"))
      << *text;
  EXPECT_TRUE(absl::StrContains(*text, "\t.amdhsa_kernel scale\n"));
  EXPECT_TRUE(absl::StrContains(*text, "; -- End function\n;;kerncap-end function scale\n"));
  EXPECT_TRUE(absl::StrContains(*text, ";;kerncap-begin metadata scale\n  - .agpr_count"));
  EXPECT_TRUE(absl::StrContains(*text, ".symbol:         scale.kd\n    .vgpr_count:     4\n"
                                       ";;kerncap-end metadata scale\n"));
  EXPECT_TRUE(absl::StrContains(*text, "amdgcn-amd-amdhsa--gfx90a:xnack-"));
  EXPECT_TRUE(absl::StrContains(*text, "; kerncap-module: fnv1a64="));
  for (const char* other : {"other", "helper", "gval", "_Z4tmplIiEvPT_", "amdhsa.target"}) {
    for (absl::string_view line : absl::StrSplit(*text, '\n')) {
      if (absl::StartsWith(line, ";")) continue;  // the header comment
      EXPECT_FALSE(absl::StrContains(line, other)) << other << " in: " << line;
    }
  }
}

// The edited file with `edit` applied to it.
std::string Edited(const std::vector<std::pair<std::string, std::string>>& edit) {
  auto text = ExtractKernel(kModule, "scale", "build/module.s");
  EXPECT_TRUE(text.ok()) << text.status();
  return absl::StrReplaceAll(*text, edit);
}

// The spliced module without its line markers.
std::string Unmarked(const std::string& spliced) {
  std::string out;
  for (absl::string_view l : absl::StrSplit(spliced, '\n')) {
    if (absl::StartsWith(l, "# ")) continue;
    absl::StrAppend(&out, l, "\n");
  }
  return out.substr(0, out.size() - 1);
}

TEST(AmdgpuAsmTest, UneditedSpliceGivesTheModuleBack) {
  auto r = SpliceKernel(kModule, Edited({}), "scale");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(Unmarked(r->text), kModule);
  EXPECT_TRUE(r->notes.empty());
  EXPECT_TRUE(r->warnings.empty());
  EXPECT_TRUE(absl::StartsWith(r->text, "# 1 \"build/module.s\"\n\t.text\n"));
}

TEST(AmdgpuAsmTest, EditReplacesOnlyTheKernelWithLineMarkers) {
  const std::string edited = Edited({{"; %bb.0:\n", "; %bb.0:\n\ts_nop 7\n"}});
  auto r = SpliceKernel(kModule, edited, "scale");
  ASSERT_TRUE(r.ok()) << r.status();
  const std::string expect = absl::StrReplaceAll(kModule, {{"; %bb.0:\n", "; %bb.0:\n\ts_nop 7\n"}});
  EXPECT_EQ(Unmarked(r->text), expect);
  // The block's first line is reported as its line in the edited file, the
  // line after the block as its line in the module.
  std::vector<std::string> el = SplitLines(edited);
  size_t first = 0;
  while (el[first] != ";;kerncap-begin function scale") ++first;
  EXPECT_TRUE(absl::StrContains(
      r->text, absl::StrCat("# ", first + 2, " \"asm/kernel.s\"\n\t.text\n\t.protected\tscale")))
      << r->text;
  std::vector<std::string> ml = Lines();
  size_t end_fn = LineOf(".size\tscale,") + 2;  // 0-based, first line after the part
  EXPECT_TRUE(absl::StrContains(
      r->text, absl::StrCat("; -- End function\n# ", end_fn + 1, " \"build/module.s\"\n",
                            ml[end_fn], "\n")))
      << r->text;
}

TEST(AmdgpuAsmTest, RaisesRegisterCountsToWhatTheCodeNames) {
  auto r = SpliceKernel(
      kModule, Edited({{"; %bb.0:\n", "; %bb.0:\n\tv_mov_b32_e32 v[40:41], s[50:51]\n"}}),
      "scale");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(absl::StrContains(r->text, ".amdhsa_next_free_vgpr 42\n")) << r->text;
  EXPECT_TRUE(absl::StrContains(r->text, ".amdhsa_accum_offset 44\n"));
  EXPECT_TRUE(absl::StrContains(r->text, ".amdhsa_next_free_sgpr 52\n"));
  EXPECT_TRUE(absl::StrContains(r->text, ".vgpr_count:     42\n"));
  EXPECT_TRUE(absl::StrContains(r->text, ".sgpr_count:     58\n"));  // 39 + (52 - 33)
  // Other kernels keep theirs.
  EXPECT_TRUE(absl::StrContains(r->text, ".amdhsa_next_free_vgpr 5\n"));
  EXPECT_TRUE(absl::StrContains(r->text, ".vgpr_count:     5\n"));
  ASSERT_EQ(r->notes.size(), 1u);
  EXPECT_TRUE(absl::StrContains(r->notes[0], "up to v41, s51")) << r->notes[0];
  EXPECT_TRUE(absl::StrContains(r->notes[0], ".amdhsa_next_free_vgpr 4 -> 42")) << r->notes[0];

  // AGPRs on gfx90a: after accum_offset.
  r = SpliceKernel(kModule, Edited({{"; %bb.0:\n", "; %bb.0:\n\tv_accvgpr_write_b32 a3, v9\n"}}),
                   "scale");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(absl::StrContains(r->text, ".amdhsa_accum_offset 12\n")) << r->text;
  EXPECT_TRUE(absl::StrContains(r->text, ".amdhsa_next_free_vgpr 16\n")) << r->text;
  EXPECT_TRUE(absl::StrContains(r->text, ".agpr_count:     4\n")) << r->text;

  // Lower use: nothing changes; kept on request.
  r = SpliceKernel(kModule, Edited({{"v_add_u32_e32 v0, s4, v0\n", ""}}), "scale");
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->notes.empty());
  SpliceOptions keep;
  keep.keep_register_counts = true;
  r = SpliceKernel(kModule, Edited({{"; %bb.0:\n", "; %bb.0:\n\tv_mov_b32 v99, 0\n"}}), "scale",
                   keep);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(absl::StrContains(r->text, ".amdhsa_next_free_vgpr 4\n"));
  EXPECT_TRUE(r->notes.empty());
}

TEST(AmdgpuAsmTest, ScanSkipsMnemonicsCommentsAndDirectives) {
  RegisterUse u = ScanRegisters({
      "\ts_waitcnt vmcnt(0) lgkmcnt(0)   ; v77 in a comment",
      "\tv_cmp_gt_i32_e32 vcc, s9, v3",
      "\ts_add_u32 s4, s4, a1@rel32@lo+4",
      "\ts_load_dwordx8 s[12 : 19], s[4:5], 0x0",
      "\tv_mfma_f32_4x4x1f32 a[0:3], v1, v2, a[0:3]",
      "\t.amdhsa_next_free_vgpr 200",
      ".LBB0_1: v_mov_b32 v7, 0xa9",
      "\tv_mov_b32 v5, abs(v6) // v88",
  });
  EXPECT_EQ(u.vgpr, 7);
  EXPECT_EQ(u.sgpr, 19);
  EXPECT_EQ(u.agpr, 3);
}

TEST(AmdgpuAsmTest, BrokenEditsAreNamed) {
  auto expect_error = [](const std::string& edited, const std::string& needle) {
    auto r = SpliceKernel(kModule, edited, "scale");
    ASSERT_FALSE(r.ok()) << needle;
    EXPECT_TRUE(absl::StrContains(r.status().message(), needle)) << r.status();
    EXPECT_TRUE(absl::StartsWith(r.status().message(), "asm/kernel.s")) << r.status();
  };
  expect_error(Edited({{";;kerncap-end function scale\n", ""}}),
               "its ;;kerncap-end function scale marker is missing");
  expect_error(Edited({{";;kerncap-end metadata scale\n", ""}}),
               "has no ;;kerncap-end metadata scale marker after it");
  expect_error(Edited({{";;kerncap-begin metadata scale\n", ""}}),
               "without a ;;kerncap-begin metadata scale above it");
  expect_error("\t.text\nscale:\n\ts_endpgm\n", "no ;;kerncap-begin / ;;kerncap-end markers");
  expect_error(Edited({{"metadata scale", "metadata other"}}), "block for kernel other");
  expect_error(Edited({{"\nscale:", "\nnot_scale:"}}),
               "no longer defines the label scale:");
  expect_error(Edited({{"\t.amdhsa_kernel scale\n", ""}}), "no longer has .amdhsa_kernel scale");
  // A block of the module missing from the file.
  std::string no_md = Edited({});
  no_md = no_md.substr(0, no_md.find(";;kerncap-begin metadata"));
  expect_error(no_md, "the ;;kerncap-begin metadata scale ... ;;kerncap-end metadata scale block "
                      "is missing");
  // The line of a broken marker is named.
  const std::string e = Edited({{";;kerncap-end function scale\n", ""}});
  std::vector<std::string> el = SplitLines(e);
  size_t line = 0;
  while (el[line] != ";;kerncap-begin metadata scale") ++line;
  expect_error(e, absl::StrCat("asm/kernel.s:", line + 1, ": "));
}

TEST(AmdgpuAsmTest, WarnsWhenCutFromAnotherModule) {
  const std::string edited = Edited({});
  const std::string changed =
      absl::StrReplaceAll(kModule, {{"v_mov_b32_e32 v4, 0", "v_mov_b32_e32 v4, 1"}});
  auto r = SpliceKernel(changed, edited, "scale");
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->warnings.size(), 1u);
  EXPECT_TRUE(absl::StrContains(r->warnings[0], "cut from a different build/module.s"));
  EXPECT_TRUE(absl::StrContains(r->text, "v_mov_b32_e32 v4, 1"));
}

TEST(AmdgpuAsmTest, AssemblerFlagsFollowTheModule) {
  auto f = AssemblerFlags(kModule);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(*f, (std::vector<std::string>{"-mcpu=gfx90a:xnack-", "-mcode-object-version=4"}));
  const std::string v5 = absl::StrReplaceAll(kModule, {{"  - 1\n  - 1\n", "  - 1\n  - 2\n"}});
  f = AssemblerFlags(v5);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ((*f)[1], "-mcode-object-version=5");
  f = AssemblerFlags("\t.text\n", "gfx1030");
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(*f, std::vector<std::string>{"-mcpu=gfx1030"});
  EXPECT_FALSE(AssemblerFlags("\t.text\n").ok());
}

}  // namespace
}  // namespace kerncap::repro
