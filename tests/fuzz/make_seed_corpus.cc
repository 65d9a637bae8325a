// make_seed_corpus: writes the seed corpus of the fuzzers (tests/fuzz/corpus,
// small files kept in the repository). Run by build_fuzzers.sh --seeds; the
// seeds are valid inputs of each target, so the fuzzers start from inputs
// that reach deep into the parsers.
#include <sys/stat.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "format/kcap_file.h"
#include "common/agent_link/messages.h"
#include "common/digest.h"
#include "format/codec.h"
#include "kerncap/v1/control.pb.h"
#include "nlohmann/json.hpp"

namespace {

using namespace kerncap;  // NOLINT: a small generator

void Write(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  std::printf("%s (%zu bytes)\n", path.c_str(), bytes.size());
}

constexpr uint32_t kChunk = 4096;

struct Capture {
  v1::CaptureManifest manifest;
  std::vector<v1::TransferChunk> chunks;
};

// A small capture: a pre region of 2.5 chunks (one zero, one raw, one zstd),
// a diff post region, a code object.
Capture MakeCapture() {
  Capture c;
  v1::CaptureManifest& m = c.manifest;
  m.set_format_version(1);
  m.set_capture_id("cap-0123456789ab");
  m.mutable_kernel()->set_mangled_name("_Z4kernv");
  m.mutable_kernel()->set_platform(v1::PLATFORM_CUDA);
  m.set_argument_blob(std::string(16, 'a'));
  store::ChunkCompressor compressor(1);
  auto add_chunk = [&](const std::string& raw) {
    std::string stored;
    auto codec = compressor.Encode(raw, &stored);
    v1::TransferChunk t;
    t.set_digest(Sha256(raw).ToBytes());
    t.set_codec(*codec == 2 ? v1::CODEC_ZSTD : v1::CODEC_RAW);
    t.set_raw_size(static_cast<uint32_t>(raw.size()));
    t.set_data(stored);
    c.chunks.push_back(t);
    return t.digest();
  };
  std::string random(kChunk, '\0');
  for (size_t i = 0; i < random.size(); ++i) random[i] = static_cast<char>((i * 2654435761u) >> 13);
  v1::Region* pre = m.mutable_pre()->add_regions();
  pre->set_va(0x7f0000000000);
  pre->set_kind(v1::REGION_DEVICE);
  pre->mutable_data()->set_size(2 * kChunk + kChunk / 2);
  pre->mutable_data()->set_chunk_size(kChunk);
  pre->mutable_data()->add_chunk_digests("");
  pre->mutable_data()->add_chunk_digests(add_chunk(random));
  pre->mutable_data()->add_chunk_digests(add_chunk(std::string(kChunk / 2, 'z')));
  v1::Region* post = m.mutable_post()->add_regions();
  *post = *pre;
  post->set_diff(true);
  post->mutable_data()->clear_chunk_digests();
  post->add_changed_chunks(0);
  post->mutable_data()->add_chunk_digests(add_chunk(std::string(kChunk, 'p')));
  v1::CodeObject* co = m.add_code_objects();
  co->set_format(v1::CODE_OBJECT_CUBIN);
  co->set_name("kernel.cubin");
  co->mutable_data()->set_size(100);
  co->mutable_data()->set_chunk_size(kChunk);
  co->mutable_data()->add_chunk_digests(add_chunk(std::string(100, 'c')));
  return c;
}

std::string Frame(link::MessageType type, const std::string& json, const std::string& payload = "") {
  link::FrameHeader h;
  h.type = static_cast<uint16_t>(type);
  h.json_length = static_cast<uint32_t>(json.size());
  h.payload_length = payload.size();
  uint8_t header[link::kFrameHeaderSize];
  link::EncodeFrameHeader(h, header);
  return std::string(reinterpret_cast<char*>(header), sizeof(header)) + json + payload;
}

template <typename M>
std::string Msg(const M& m, const std::string& payload = "") {
  return Frame(M::kType, link::EncodeBody(m), payload);
}

void AgentLinkSeeds(const std::string& dir) {
  link::HelloMsg hello;
  hello.pid = 77;
  hello.process_name = "app";
  hello.platform = link::Platform::kSynthetic;
  link::HelloMsg lazy = hello;
  lazy.features = {link::kFeatureLazyRing, link::kFeatureRingRelease,
                   link::kFeatureDispatchSkipped};
  link::CaptureBeginMsg begin;
  begin.token = 1;
  begin.arm_id = "arm-0000000000000000";  // replaced by the fuzzer's arm
  begin.demangled_name = "k";
  begin.launch.grid = {1, 1, 1};
  link::RegionBeginMsg region;
  region.token = 1;
  region.size = 3 * 4096 + 100;  // the fuzzer's chunk and slot size is 4096
  region.va = 0x7f0000000000;
  link::RegionBeginMsg post = region;
  post.region = 1;
  post.image = link::ImageKind::kPost;
  link::SlotFilledMsg slot;
  slot.token = 1;
  slot.length = 4096;
  link::SlotFilledMsg tail = slot;
  tail.slot = 1;
  tail.offset = 4096;
  tail.length = 4096;
  link::CodeObjectMsg code;
  code.token = 1;
  code.format = link::CodeObjectFormat::kCubin;
  code.name = "k.cubin";
  link::CaptureEndMsg end;
  end.token = 1;
  link::CaptureAbortMsg abort;
  abort.token = 1;
  abort.reason = "test";
  link::RingRequestMsg ring;
  ring.reason = link::RingRequestReason::kCapture;
  link::RingReleaseMsg release;
  link::DispatchSkippedMsg skipped;
  skipped.arm_id = begin.arm_id;
  skipped.kernel = "k";
  skipped.reason = "graph";
  Write(dir + "/hello", Msg(hello));
  Write(dir + "/capture", Msg(hello) + Msg(begin, std::string(16, 'a')) + Msg(region) +
                              Msg(slot) + Msg(tail) + Msg(post) + Msg(code, "CUBIN") + Msg(end));
  Write(dir + "/lazy_capture", Msg(lazy) + Msg(ring) + Msg(begin) + Msg(region) + Msg(slot) +
                                   Msg(end) + Msg(release) + Msg(skipped));
  Write(dir + "/abort", Msg(hello) + Msg(begin) + Msg(region) + Msg(slot) + Msg(abort) +
                            Msg(begin) + Msg(end));
}

void ReferenceSeeds(const std::string& dir) {
  nlohmann::json metadata = {
      {"kernel_name", "k(float*)"},
      {"kernel_symbol", "_Z1kPf"},
      {"gpu_arch", "gfx90a"},
      {"grid", {{"x", 64}, {"y", 1}, {"z", 1}}},
      {"block", {{"x", 64}, {"y", 1}, {"z", 1}}},
      {"kernarg_slots", {{{"offset", 0}, {"size", 8}, {"value_kind", "global_buffer"}}}},
  };
  nlohmann::json dispatch = {{"agent_name", "gfx90a"}, {"grid", {64, 1, 1}},
                             {"block", {64, 1, 1}},    {"private_segment_size", 0},
                             {"kernarg_size", 64},     {"dispatch_index", 3}};
  nlohmann::json regions = {
      {"regions",
       {{{"base", "0x1000"}, {"size", 4096}, {"is_vmem", false}},
        {{"base", 8192}, {"size", 65536 + 7}, {"contains_kernarg", true}}}}};
  nlohmann::json modvars = {
      {"variables",
       {{{"name", "v"}, {"size", 16}, {"blob", "module_variables/v.bin"}},
        {{"name", "w"}, {"size", 3}, {"blob", "eHl6"}, {"address", "0x4000"}}}}};
  const std::string sep = "\n--8<--\n";
  Write(dir + "/full", metadata.dump() + sep + dispatch.dump() + sep + regions.dump() + sep +
                           modvars.dump());
  regions["regions"][0]["file"] = "link";
  Write(dir + "/link", metadata.dump() + sep + dispatch.dump() + sep + regions.dump());
  regions["regions"][0]["file"] = "fifo";
  Write(dir + "/fifo", metadata.dump() + sep + dispatch.dump() + sep + regions.dump());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_seed_corpus CORPUS_DIR\n");
    return 2;
  }
  const std::string root = argv[1];
  for (const char* t : {"", "/manifest", "/kcap_file", "/agent_link", "/reference_import"}) {
    ::mkdir((root + t).c_str(), 0755);
  }
  Capture c = MakeCapture();
  Write(root + "/manifest/capture", c.manifest.SerializeAsString());
  Write(root + "/manifest/empty", "");
  for (bool with_chunks : {true, false}) {
    const std::string path = root + (with_chunks ? "/kcap_file/capture" : "/kcap_file/manifest_only");
    auto w = kcap::KcapWriter::Create(path);
    if (!w.ok()) return 1;
    v1::TransferFrame f;
    *f.mutable_manifest() = c.manifest;
    f.set_chunks_total(with_chunks ? c.chunks.size() : 0);
    (void)(*w)->Append(f);
    if (with_chunks) {
      for (const auto& chunk : c.chunks) {
        v1::TransferFrame cf;
        *cf.mutable_chunk() = chunk;
        (void)(*w)->Append(cf);
      }
    }
    if (!(*w)->Finish().ok()) return 1;
    std::printf("%s\n", path.c_str());
  }
  AgentLinkSeeds(root + "/agent_link");
  ReferenceSeeds(root + "/reference_import");
  return 0;
}
