#include "reproducer/generator/source_locator.h"

#include <gtest/gtest.h>

namespace kerncap::repro {
namespace {

TEST(KernelIdentifierTest, StripsScopeTemplateArgumentsAndParameters) {
  EXPECT_EQ(KernelIdentifier("void kcsim::attention_scores_kernel<64>(float const*, float const*, "
                             "float*, int, int, float)"),
            "attention_scores_kernel");
  EXPECT_EQ(KernelIdentifier("void ns::inner::scale<float, std::pair<int, int> >(float*)"), "scale");
  EXPECT_EQ(KernelIdentifier("add_kernel"), "add_kernel");
  EXPECT_EQ(KernelIdentifier("vector_add(float const*, float*, int)"), "vector_add");
  EXPECT_EQ(KernelIdentifier("void (anonymous namespace)::k(int)"), "k");
  EXPECT_EQ(KernelIdentifier(""), "");
}

TEST(SourceDefinesKernelTest, FindsDefinitionsNotOtherMentions) {
  const char* scores = R"(
template <int kHeadDim>
__global__ void attention_scores_kernel(const float* q) {}
void Launch() { attention_scores_kernel<64><<<1, 1>>>(nullptr); }
)";
  EXPECT_TRUE(SourceDefinesKernel(scores, "attention_scores_kernel"));
  // A unit that only declares host functions with a longer name, or mentions
  // the kernel in a comment, does not define it.
  EXPECT_FALSE(SourceDefinesKernel("void attention_scores_kernel_launcher(int);",
                                   "attention_scores_kernel"));
  EXPECT_FALSE(SourceDefinesKernel("// calls attention_scores_kernel later\nint x;",
                                   "attention_scores_kernel"));
  // No __global__ in the file: a host function of the same name.
  EXPECT_FALSE(SourceDefinesKernel("void attention_scores_kernel(int) {}", "attention_scores_kernel"));
  EXPECT_FALSE(SourceDefinesKernel(scores, ""));
}

}  // namespace
}  // namespace kerncap::repro
