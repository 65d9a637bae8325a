// synthetic_agent: a stand-in for libkerncap_agent.so in tests. It connects to
// kerncapd's agent socket, "launches" fake kernels in a loop, and captures
// the ones the daemon arms, sending deterministic region contents (see
// synthetic_content.h) through the real ring protocol.
//
//   synthetic_agent --socket=PATH --kernels=matmul,softmax --dispatches=10
//                   --region-mib=4,0.5 --seed=7 --mutate --wait-arm-ms=2000
//                   [--eager-ring] [--substitution --wait-substitution-ms=2000
//                   --dispatch-interval-ms=1] [--wait-sample-ms=5000]
//
// Like the CUDA agent it asks for its staging ring only when an arm applies
// and gives it back when none does ("lazy_ring" + "ring_release");
// --eager-ring takes the ring at connect time instead, as older agents do.
//
// Dispatch i launches kernels[i % K] on device 0. Region r of dispatch i has
// pre-image SyntheticBytes(seed, r, i, size) and post-image version i+1 with
// --mutate (an in-place kernel), else version i. Prints one JSON line per
// capture attempt: {"capture_id":...,"kernel":...,"dispatch":...,"arm_id":...}
// or {"error":...,"kernel":...,"dispatch":...}, and exits 0 (2 on bad flags).
//
// --substitution offers live substitution (SubstitutionTable, as the CUDA
// agent): a code object that starts with "SYNTHETIC-VARIANT" "loads", any
// other is refused ("not a synthetic variant"). Each substituted dispatch
// prints {"kernel":...,"dispatch":...,"substituted":true|false}; with A/B the
// variant "takes" 1 us of device time and the original 2 us, so the figures
// that come back are known exactly.
#include <unistd.h>

#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "agent/link/agent_link_client.h"
#include "agent/link/launch_sampler.h"
#include "agent/link/substitution_table.h"
#include "agent/testing/synthetic_content.h"
#include "nlohmann/json.hpp"

namespace {

using kerncap::agent::AgentLinkClient;
using kerncap::agent::AgentLinkClientOptions;
using kerncap::agent::CaptureSession;
namespace st = kerncap::agent::testing;
namespace link = kerncap::link;

struct Flags {
  std::string socket;
  std::vector<std::string> kernels = {"synthetic_kernel"};
  uint64_t dispatches = 1;
  std::vector<uint64_t> region_bytes = {1ull << 20};
  uint64_t seed = 1;
  bool mutate = false;
  int wait_arm_ms = 0;
  bool eager_ring = false;
  bool substitution = false;
  int wait_substitution_ms = 0;
  int dispatch_interval_ms = 0;
  // Launch shapes (per-shape arms): 0, every dispatch its own grid; else
  // dispatch i has grid (i % shapes) + 1, a scalar argument i % scalar_shapes
  // (when set) and buffer pointers that move inside their regions.
  uint64_t shapes = 0;
  uint64_t scalar_shapes = 0;
  // Launch sampling is always offered; > 0: the dispatches start only once
  // a sample runs (or after this long), and the agent stays until it ended.
  int wait_sample_ms = 0;
};

std::vector<std::string> Split(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t comma = s.find(',', start);
    if (comma == std::string::npos) comma = s.size();
    if (comma > start) out.push_back(s.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

bool ParseFlags(int argc, char** argv, Flags* f, std::string* error) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    std::string key = arg, value;
    size_t eq = arg.find('=');
    if (eq != std::string::npos) {
      key = arg.substr(0, eq);
      value = arg.substr(eq + 1);
    }
    char* end = nullptr;
    if (key == "--socket") {
      f->socket = value;
    } else if (key == "--kernels") {
      f->kernels = Split(value);
      if (f->kernels.empty()) {
        *error = "--kernels needs at least one name";
        return false;
      }
    } else if (key == "--dispatches") {
      f->dispatches = std::strtoull(value.c_str(), &end, 10);
      if (value.empty() || *end != '\0') {
        *error = "bad --dispatches";
        return false;
      }
    } else if (key == "--region-mib") {
      f->region_bytes.clear();
      for (const std::string& v : Split(value)) {
        double mib = std::strtod(v.c_str(), &end);
        if (*end != '\0' || !(mib > 0) || mib > 65536) {
          *error = "bad --region-mib value '" + v + "'";
          return false;
        }
        f->region_bytes.push_back(static_cast<uint64_t>(std::llround(mib * (1 << 20))));
      }
    } else if (key == "--shapes" || key == "--scalar-shapes") {
      uint64_t v = std::strtoull(value.c_str(), &end, 10);
      if (value.empty() || *end != '\0' || v == 0) {
        *error = "bad " + key + " (a count of 1 or more)";
        return false;
      }
      (key == "--shapes" ? f->shapes : f->scalar_shapes) = v;
    } else if (key == "--seed") {
      f->seed = std::strtoull(value.c_str(), &end, 10);
      if (value.empty() || *end != '\0') {
        *error = "bad --seed";
        return false;
      }
    } else if (key == "--mutate") {
      f->mutate = value.empty() || value == "true" || value == "1";
    } else if (key == "--eager-ring") {
      f->eager_ring = value.empty() || value == "true" || value == "1";
    } else if (key == "--substitution") {
      f->substitution = value.empty() || value == "true" || value == "1";
    } else if (key == "--wait-substitution-ms") {
      f->wait_substitution_ms = std::atoi(value.c_str());
    } else if (key == "--dispatch-interval-ms") {
      f->dispatch_interval_ms = std::atoi(value.c_str());
    } else if (key == "--wait-arm-ms") {
      f->wait_arm_ms = std::atoi(value.c_str());
    } else if (key == "--wait-sample-ms") {
      f->wait_sample_ms = std::atoi(value.c_str());
    } else {
      *error = "unknown flag " + key;
      return false;
    }
  }
  return true;
}

// Writes one image of region r through ring slots, generating the bytes
// straight into slot memory (the zero-copy path a GPU agent uses).
link::LinkStatus SendImage(CaptureSession& s, uint32_t handle, uint32_t r, uint64_t size,
                           uint64_t seed, uint64_t version) {
  for (uint64_t offset = 0; offset < size; offset += s.slot_size()) {
    auto slot = s.AcquireSlot(30000);
    if (!slot.ok()) return slot.status();
    uint64_t n = std::min(s.slot_size(), size - offset);
    st::FillSynthetic(seed, r, version, offset, n, slot->data);
    link::LinkStatus status = s.SubmitSlot(*slot, handle, offset, n);
    if (!status.ok()) return status;
  }
  return link::LinkStatus::Ok();
}

// Dispatch i's launch: its grid and argument blob (one pointer per region,
// then the scalar with --scalar-shapes).
struct SyntheticLaunch {
  std::array<uint32_t, 3> grid{1, 1, 1};
  std::array<uint32_t, 3> block{128, 1, 1};
  std::string blob;
  bool has_scalar = false;
};

SyntheticLaunch LaunchOf(const Flags& f, uint64_t dispatch) {
  SyntheticLaunch l;
  l.grid[0] = static_cast<uint32_t>(f.shapes == 0 ? dispatch + 1 : dispatch % f.shapes + 1);
  for (uint32_t r = 0; r < f.region_bytes.size(); ++r) {
    uint64_t va = st::SyntheticVa(r);
    if (f.shapes != 0) va += 64 * (dispatch % 4) % f.region_bytes[r];
    l.blob.append(reinterpret_cast<const char*>(&va), sizeof(va));
  }
  if (f.scalar_shapes != 0) {
    const uint64_t n = dispatch % f.scalar_shapes;
    l.blob.append(reinterpret_cast<const char*>(&n), sizeof(n));
    l.has_scalar = true;
  }
  return l;
}

// The synthetic "allocation table": the regions' address ranges.
bool PointsIntoRegion(const Flags& f, uint64_t word) {
  for (uint32_t r = 0; r < f.region_bytes.size(); ++r) {
    if (word >= st::SyntheticVa(r) && word - st::SyntheticVa(r) < f.region_bytes[r]) return true;
  }
  return false;
}

nlohmann::json Capture(AgentLinkClient& client, const Flags& f, const std::string& kernel,
                       uint64_t dispatch, const kerncap::agent::ArmMatch& arm) {
  nlohmann::json line = {{"kernel", kernel}, {"dispatch", dispatch}, {"arm_id", arm.arm_id}};
  if (!arm.launch_shape.empty()) line["launch_shape"] = arm.launch_shape;
  const SyntheticLaunch launch = LaunchOf(f, dispatch);
  link::CaptureBeginMsg begin;
  begin.arm_id = arm.arm_id;
  begin.mangled_name = st::SyntheticMangled(kernel);
  begin.demangled_name = kernel;
  begin.platform = link::Platform::kSynthetic;
  begin.arch = "synthetic";
  begin.launch.grid = {launch.grid.begin(), launch.grid.end()};
  begin.launch.block = {launch.block.begin(), launch.block.end()};
  begin.device = 0;
  begin.dispatch_index = arm.dispatch_index;
  begin.launch_shape = arm.launch_shape;
  const std::string& blob = launch.blob;
  for (uint32_t r = 0; r < f.region_bytes.size(); ++r) {
    begin.arguments.push_back({r * 8, 8, link::ArgumentKind::kPointer, "buf" + std::to_string(r), "void*", ""});
  }
  if (launch.has_scalar) {
    begin.arguments.push_back({static_cast<uint32_t>(f.region_bytes.size() * 8), 8,
                               link::ArgumentKind::kValue, "n", "uint64_t", ""});
  }
  auto session = client.BeginCapture(begin, blob);
  if (!session.ok()) {
    line["error"] = session.error();
    return line;
  }
  CaptureSession& s = **session;
  link::LinkStatus status;
  uint64_t post_version = f.mutate ? dispatch + 1 : dispatch;
  for (int image = 0; image < 2 && status.ok(); ++image) {
    for (uint32_t r = 0; r < f.region_bytes.size() && status.ok(); ++r) {
      link::RegionBeginMsg region;
      region.image = image == 0 ? link::ImageKind::kPre : link::ImageKind::kPost;
      region.va = st::SyntheticVa(r);
      region.size = f.region_bytes[r];
      region.kind = link::RegionKind::kDevice;
      region.name = "buf" + std::to_string(r);
      auto handle = s.AddRegion(region);
      if (!handle.ok()) {
        status = handle.status();
        break;
      }
      status = SendImage(s, *handle, r, f.region_bytes[r], f.seed,
                         image == 0 ? dispatch : post_version);
    }
  }
  if (status.ok()) {
    std::string code = "KCSYNTH\n" + kernel;
    status = s.AddCodeObject(link::CodeObjectFormat::kCubin, kernel + ".cubin", code.data(), code.size());
  }
  if (!status.ok()) {
    s.Abort(status.message());
    line["error"] = status.message();
    return line;
  }
  auto id = s.End(/*post_complete=*/true);
  if (id.ok()) {
    line["capture_id"] = *id;
  } else {
    line["error"] = id.error();
  }
  return line;
}

}  // namespace

constexpr char kUsage[] = R"(synthetic_agent: a stand-in for libkerncap_agent.so (no GPU needed).
Connects to kerncapd's agent socket, "launches" fake kernels and captures the ones kerncapd arms.

Usage: synthetic_agent [--socket=PATH] [--kernels=A,B,...] [--dispatches=N]
                       [--region-mib=X,Y,...] [--seed=N] [--mutate] [--wait-arm-ms=MS]
                       [--eager-ring] [--shapes=N [--scalar-shapes=M]] [--wait-sample-ms=MS]

  --socket=PATH        kerncapd's agent socket (default: $KERNCAP_AGENT_SOCKET, else
                       kerncapd's default agent socket)
  --kernels=A,B        kernel names; dispatch i launches kernels[i % count] (default
                       synthetic_kernel)
  --dispatches=N       how many dispatches to launch (default 1)
  --region-mib=X,Y     one region per size, in MiB (default 1)
  --seed=N             content seed (default 1)
  --mutate             the kernel writes its regions (post image differs from pre)
  --wait-arm-ms=MS     wait up to MS for an arm before the first dispatch (default 0)
  --eager-ring         take the staging ring at connect time instead of when armed
  --shapes=N           dispatch i launches with grid (i % N) + 1, its buffer pointers moving
                       inside their regions (default: grid i + 1, every dispatch its own shape)
  --scalar-shapes=M    dispatch i also passes a scalar argument i % M (per-shape arms
                       tell these apart with --per-shape=scalars, not with =launch)
  --wait-sample-ms=MS  dispatch only once `kerncapctl kernels --sample` counts (waiting up to
                       MS), then stay until that sample ended (up to MS more) and 2 s after

Prints one JSON line per capture attempt ({"capture_id":...,"kernel":...,"dispatch":...}
or {"error":...}); exits 0, or 2 on bad flags.

Example (with kerncapd running):
  kerncapctl arm --kernel=matmul --count=1
  synthetic_agent --kernels=matmul_bf16,softmax --dispatches=3 --region-mib=8,32,4 --mutate
)";

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
      std::fputs(kUsage, stdout);
      return 0;
    }
  }
  Flags flags;
  std::string error;
  if (!ParseFlags(argc, argv, &flags, &error)) {
    std::fprintf(stderr, "synthetic_agent: %s (synthetic_agent --help lists the flags)\n",
                 error.c_str());
    return 2;
  }
  AgentLinkClientOptions options;
  options.socket_path = flags.socket;
  options.identity.platform = link::Platform::kSynthetic;
  options.identity.agent_version = "synthetic-0.1";
  link::DeviceInfo device;
  device.name = "Synthetic Device";
  device.arch = "synthetic";
  device.total_memory = 1ull << 34;
  options.identity.devices.push_back(device);
  options.initial_wait_ms = 5000;
  options.lazy_ring = !flags.eager_ring;
  // The kernel census: the kernels this synthetic application dispatches,
  // each once, in one synthetic module.
  options.list_kernels = [&flags] {
    std::vector<link::LoadedKernelInfo> out;
    for (const std::string& k : flags.kernels) {
      bool seen = false;
      for (const link::LoadedKernelInfo& e : out) seen = seen || e.demangled_name == k;
      if (seen) continue;
      link::LoadedKernelInfo info;
      info.mangled_name = st::SyntheticMangled(k);
      info.demangled_name = k;
      info.module = "synthetic-module-0";
      out.push_back(std::move(info));
    }
    return out;
  };
  using kerncap::agent::SubstitutionTable;
  SubstitutionTable table(static_cast<uint32_t>(::getpid()), "synthetic_agent");
  if (flags.substitution) {
    options.on_substitute = [&table](const link::SubstituteMsg& m, std::string code) {
      return table.Add(m, std::move(code), SubstitutionTable::Clock::now());
    };
    options.on_unsubstitute = [&table](const link::UnsubstituteMsg& m) {
      table.Remove(m.sub_id, m.reason);
    };
    options.on_link_lost = [&table] { table.DropAll(); };
  }
  // Launch sampling (kerncapctl kernels --sample): every dispatch is counted
  // with its grid and argument shape while a sample runs.
  kerncap::agent::LaunchSampler sampler;
  options.launch_sampler = &sampler;
  AgentLinkClient client(options);
  client.Start();
  auto send_reports = [&](bool force) {
    for (const auto& r : table.TakeReports(SubstitutionTable::Clock::now(), force)) {
      client.SendSubstitutionReport(r);
    }
  };
  if (flags.substitution && flags.wait_substitution_ms > 0) {
    for (int waited = 0; !table.live() && waited < flags.wait_substitution_ms; waited += 10) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  if (flags.wait_arm_ms > 0 && !client.WaitArms(1, flags.wait_arm_ms)) {
    std::fprintf(stderr, "synthetic_agent: no arm within %d ms (%s)\n", flags.wait_arm_ms,
                 client.last_error().c_str());
  }
  auto wait_sample = [&](bool running) {
    for (int waited = 0; sampler.active() != running && waited < flags.wait_sample_ms;
         waited += 10) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  };
  if (flags.wait_sample_ms > 0) wait_sample(true);
  for (uint64_t i = 0; i < flags.dispatches; ++i) {
    const std::string& kernel = flags.kernels[i % flags.kernels.size()];
    if (flags.dispatch_interval_ms > 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(flags.dispatch_interval_ms));
    }
    if (table.live()) {
      auto prepare = [](const link::SubstituteMsg&, const std::string& image, std::string_view)
          -> link::LinkResult<SubstitutionTable::Prepared> {
        if (image.rfind("SYNTHETIC-VARIANT", 0) != 0) {
          return link::LinkStatus::Error("not a synthetic variant");
        }
        SubstitutionTable::Prepared p;
        p.variant = std::make_shared<kerncap::agent::SubstitutionVariant>();
        p.checks = {"synthetic: the image starts with SYNTHETIC-VARIANT"};
        return p;
      };
      auto d = table.Decide(kernel, st::SyntheticMangled(kernel), 0,
                            SubstitutionTable::Clock::now(), prepare, {});
      if (d) {
        if (d->timed) table.AddTiming(d->sub_id, d->use_variant, d->use_variant ? 1.0 : 2.0);
        nlohmann::json line = {{"kernel", kernel}, {"dispatch", i},
                               {"substituted", d->use_variant}};
        std::printf("%s\n", line.dump().c_str());
        std::fflush(stdout);
      }
      send_reports(false);
    }
    const link::LaunchShapeFn shape = [&flags, i](link::PerShape mode) -> std::optional<uint64_t> {
      const SyntheticLaunch l = LaunchOf(flags, i);
      link::LaunchShapeInputs in;
      in.grid = l.grid;
      in.block = l.block;
      in.argument_blob = l.blob;
      return link::LaunchShapeKey(mode, in,
                                  [&flags](uint64_t w) { return PointsIntoRegion(flags, w); });
    };
    if (sampler.active()) {
      const SyntheticLaunch l = LaunchOf(flags, i);
      link::SampledConfig config;
      config.grid = l.grid;
      config.block = l.block;
      sampler.Record(st::SyntheticMangled(kernel), kernel, config,
                     shape(link::PerShape::kScalars));
    }
    auto arm = client.ShouldCapture(kernel, st::SyntheticMangled(kernel), 0, &shape);
    if (!arm.has_value()) continue;
    nlohmann::json line = Capture(client, flags, kernel, i, *arm);
    std::printf("%s\n", line.dump().c_str());
    std::fflush(stdout);
  }
  if (flags.substitution) {
    send_reports(true);
    client.FlushOutgoing(2000);
  }
  if (flags.wait_sample_ms > 0) {
    wait_sample(false);
    client.FlushOutgoing(2000);
    // kerncapd takes the census right after the sample: still answer it.
    std::this_thread::sleep_for(std::chrono::seconds(2));
  }
  client.Stop();
  return 0;
}
