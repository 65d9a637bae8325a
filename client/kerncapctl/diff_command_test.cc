#include "client/kerncapctl/diff_command.h"

#include <string>

#include "gtest/gtest.h"

namespace kerncap::ctl {
namespace {

// Two chunks of 4 bytes per region; the digests stand for chunk contents.
v1::CaptureManifest Capture(const std::string& id, const std::string& second_chunk,
                            uint32_t grid, const std::string& n) {
  v1::CaptureManifest m;
  m.set_capture_id(id);
  m.mutable_kernel()->set_mangled_name("_Z6matmulPfi");
  m.mutable_kernel()->set_demangled_name("matmul(float*, int)");
  m.mutable_launch()->add_grid(grid);
  m.mutable_launch()->add_block(128);
  m.set_argument_blob(std::string("\x00\x00\x10\x00\x00\x7f\x00\x00", 8) + n);
  v1::Argument* p = m.add_arguments();
  p->set_offset(0);
  p->set_size(8);
  p->set_name("p");
  v1::Argument* a = m.add_arguments();
  a->set_offset(8);
  a->set_size(4);
  a->set_name("n");
  for (uint64_t va : {0x7f0000100000ull, 0x7f0000200000ull}) {
    v1::Region* r = m.mutable_pre()->add_regions();
    r->set_va(va);
    r->mutable_data()->set_size(7);  // the last chunk is 3 bytes
    r->mutable_data()->set_chunk_size(4);
    r->mutable_data()->add_chunk_digests("same");
    r->mutable_data()->add_chunk_digests(va == 0x7f0000100000ull ? second_chunk : "x");
  }
  // The kernel wrote chunk 0 of the second region.
  v1::Region* post = m.mutable_post()->add_regions();
  post->set_va(0x7f0000200000ull);
  post->set_diff(true);
  post->add_changed_chunks(0);
  post->mutable_data()->set_size(7);
  post->mutable_data()->set_chunk_size(4);
  post->mutable_data()->add_chunk_digests("out-" + second_chunk);
  return m;
}

TEST(DiffTest, NamesWhatDiffersAndByHowMuch) {
  const v1::CaptureManifest a = Capture("cap-a", "one", 64, std::string("\x04\0\0\0", 4));
  nlohmann::json same = DiffManifests(a, a);
  EXPECT_TRUE(same["identical"].get<bool>()) << same.dump();
  EXPECT_EQ(same["regions_same"], 2);

  const v1::CaptureManifest b = Capture("cap-b", "two", 128, std::string("\x08\0\0\0", 4));
  nlohmann::json d = DiffManifests(a, b);
  EXPECT_FALSE(d["identical"].get<bool>());
  EXPECT_TRUE(d["kernel"]["same"].get<bool>());
  ASSERT_EQ(d["launch"].size(), 1u) << d.dump();
  EXPECT_EQ(d["launch"][0]["field"], "grid");
  EXPECT_EQ(d["launch"][0]["a"], "64");
  EXPECT_EQ(d["launch"][0]["b"], "128");
  ASSERT_EQ(d["arguments"].size(), 1u) << d.dump();  // p is the same pointer
  EXPECT_EQ(d["arguments"][0]["name"], "n");
  EXPECT_EQ(d["arguments"][0]["a"], "0x04000000");
  EXPECT_EQ(d["arguments"][0]["b"], "0x08000000");
  // Region 1: its second (3-byte) input chunk differs; region 2: its output.
  ASSERT_EQ(d["regions"].size(), 2u) << d.dump();
  EXPECT_EQ(d["regions"][0]["va"], "0x7f0000100000");
  EXPECT_EQ(d["regions"][0]["input_chunks_differ"], 1);
  EXPECT_EQ(d["regions"][0]["input_bytes_differ"], 3);
  EXPECT_EQ(d["regions"][0]["output_chunks_differ"], 1);  // unchanged by the kernel: its input
  EXPECT_EQ(d["regions"][1]["input_chunks_differ"], 0);
  EXPECT_EQ(d["regions"][1]["output_chunks_differ"], 1);
  EXPECT_EQ(d["regions"][1]["output_bytes_differ"], 4);

  // A region only one capture has.
  v1::CaptureManifest c = a;
  c.mutable_pre()->mutable_regions()->RemoveLast();
  c.clear_post();
  nlohmann::json e = DiffManifests(a, c);
  ASSERT_EQ(e["regions"].size(), 1u) << e.dump();
  EXPECT_EQ(e["regions"][0]["in"], "a");
}

}  // namespace
}  // namespace kerncap::ctl
