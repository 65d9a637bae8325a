#include "client/kerncapctl/diff_command.h"

#include <algorithm>
#include <map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/json_policy.h"
#include "common/status_macros.h"

namespace kerncap::ctl {
namespace {

// Per region: its size, chunk size, and the content address of every chunk
// before (input) and after (output) the dispatch. A post region holds only
// the changed chunks; the others are the pre image's.
struct RegionState {
  std::string name;
  uint64_t size = 0;
  uint32_t chunk_size = 0;
  std::vector<std::string> pre;
  std::vector<std::string> post;
};

std::map<uint64_t, RegionState> Regions(const v1::CaptureManifest& m) {
  std::map<uint64_t, RegionState> out;
  for (const v1::Region& r : m.pre().regions()) {
    RegionState& s = out[r.va()];
    s.name = r.name();
    s.size = r.data().size();
    s.chunk_size = r.data().chunk_size();
    s.pre.assign(r.data().chunk_digests().begin(), r.data().chunk_digests().end());
    s.post = s.pre;
  }
  for (const v1::Region& r : m.post().regions()) {
    auto it = out.find(r.va());
    if (it == out.end()) continue;  // manifest_check refuses a post region without its pre
    RegionState& s = it->second;
    if (!r.diff()) {
      s.post.assign(r.data().chunk_digests().begin(), r.data().chunk_digests().end());
      continue;
    }
    for (int i = 0; i < r.changed_chunks_size() && i < r.data().chunk_digests_size(); ++i) {
      const uint32_t at = r.changed_chunks(i);
      if (at < s.post.size()) s.post[at] = r.data().chunk_digests(i);
    }
  }
  return out;
}

// Chunks (and their bytes) that differ between two images of one region.
struct ChunkDiff {
  uint64_t chunks = 0;
  uint64_t differ = 0;
  uint64_t bytes = 0;
};

ChunkDiff Compare(const std::vector<std::string>& a, const std::vector<std::string>& b,
                  uint64_t size, uint32_t chunk_size) {
  ChunkDiff d;
  d.chunks = std::max(a.size(), b.size());
  for (size_t i = 0; i < d.chunks; ++i) {
    const bool same = i < a.size() && i < b.size() && a[i] == b[i];
    if (same) continue;
    ++d.differ;
    const uint64_t start = static_cast<uint64_t>(i) * chunk_size;
    d.bytes += start >= size ? 0 : std::min<uint64_t>(chunk_size, size - start);
  }
  return d;
}

std::string DimsJson(const google::protobuf::RepeatedField<uint32_t>& d) {
  return absl::StrJoin(d, ",");
}

std::string Hex(const std::string& bytes) { return "0x" + json_policy::HexBytes(bytes); }

}  // namespace

nlohmann::json DiffManifests(const v1::CaptureManifest& a, const v1::CaptureManifest& b) {
  nlohmann::json doc = {{"a", a.capture_id()}, {"b", b.capture_id()}};
  bool identical = true;

  const std::string ka = a.kernel().demangled_name().empty() ? a.kernel().mangled_name()
                                                             : a.kernel().demangled_name();
  const std::string kb = b.kernel().demangled_name().empty() ? b.kernel().mangled_name()
                                                             : b.kernel().demangled_name();
  const bool same_code = a.kernel().code_object_digest() == b.kernel().code_object_digest();
  doc["kernel"] = {{"same", ka == kb && a.kernel().mangled_name() == b.kernel().mangled_name()},
                   {"a", ka},
                   {"b", kb},
                   {"code_object_same", same_code}};
  identical = identical && doc["kernel"]["same"].get<bool>() && same_code;

  nlohmann::json launch = nlohmann::json::array();
  auto field = [&](const char* name, const std::string& x, const std::string& y) {
    if (x != y) launch.push_back({{"field", name}, {"a", x}, {"b", y}});
  };
  const v1::LaunchConfig& la = a.launch();
  const v1::LaunchConfig& lb = b.launch();
  field("grid", DimsJson(la.grid()), DimsJson(lb.grid()));
  field("block", DimsJson(la.block()), DimsJson(lb.block()));
  field("shared_mem_bytes", absl::StrCat(la.shared_mem_bytes()), absl::StrCat(lb.shared_mem_bytes()));
  field("private_mem_bytes", absl::StrCat(la.private_mem_bytes()),
        absl::StrCat(lb.private_mem_bytes()));
  field("cluster", DimsJson(la.cluster()), DimsJson(lb.cluster()));
  field("cooperative", la.cooperative() ? "true" : "false", lb.cooperative() ? "true" : "false");
  doc["launch"] = launch;
  identical = identical && launch.empty();

  // Arguments by the layout of A (the same kernel has the same layout); the
  // whole blob when there is no layout or the layouts differ.
  nlohmann::json args = nlohmann::json::array();
  const std::string& ba = a.argument_blob();
  const std::string& bb = b.argument_blob();
  bool same_layout = a.arguments_size() == b.arguments_size() && a.arguments_size() > 0;
  for (int i = 0; same_layout && i < a.arguments_size(); ++i) {
    same_layout = a.arguments(i).offset() == b.arguments(i).offset() &&
                  a.arguments(i).size() == b.arguments(i).size();
  }
  if (same_layout) {
    for (int i = 0; i < a.arguments_size(); ++i) {
      const v1::Argument& arg = a.arguments(i);
      auto slice = [&](const std::string& blob) {
        return arg.offset() >= blob.size() ? std::string()
                                           : blob.substr(arg.offset(), arg.size());
      };
      if (slice(ba) == slice(bb)) continue;
      args.push_back({{"index", i},
                      {"name", arg.name()},
                      {"offset", arg.offset()},
                      {"size", arg.size()},
                      {"a", Hex(slice(ba))},
                      {"b", Hex(slice(bb))}});
    }
  } else if (ba != bb) {
    args.push_back({{"index", nullptr},
                    {"name", "argument blob"},
                    {"offset", 0},
                    {"size", std::max(ba.size(), bb.size())},
                    {"a", Hex(ba)},
                    {"b", Hex(bb)}});
  }
  doc["arguments"] = args;
  doc["arguments_compared"] = same_layout ? a.arguments_size() : 1;
  identical = identical && args.empty();

  const auto ra = Regions(a);
  const auto rb = Regions(b);
  std::vector<uint64_t> vas;
  for (const auto& [va, s] : ra) vas.push_back(va);
  for (const auto& [va, s] : rb) {
    if (!ra.count(va)) vas.push_back(va);
  }
  std::sort(vas.begin(), vas.end());
  nlohmann::json regions = nlohmann::json::array();
  uint64_t same_regions = 0;
  for (uint64_t va : vas) {
    auto ia = ra.find(va);
    auto ib = rb.find(va);
    nlohmann::json r = {{"va", json_policy::Address(va)}};
    if (ia == ra.end() || ib == rb.end()) {
      const RegionState& s = ia == ra.end() ? ib->second : ia->second;
      r["name"] = s.name;
      r["in"] = ia == ra.end() ? "b" : "a";
      r["size"] = s.size;
      regions.push_back(r);
      continue;
    }
    const RegionState& x = ia->second;
    const RegionState& y = ib->second;
    r["name"] = x.name;
    if (x.size != y.size || x.chunk_size != y.chunk_size) {
      r["in"] = "both";
      r["size_a"] = x.size;
      r["size_b"] = y.size;
      regions.push_back(r);
      continue;
    }
    ChunkDiff in = Compare(x.pre, y.pre, x.size, x.chunk_size);
    ChunkDiff out = Compare(x.post, y.post, x.size, x.chunk_size);
    if (in.differ == 0 && out.differ == 0) {
      ++same_regions;
      continue;
    }
    r["in"] = "both";
    r["size"] = x.size;
    r["chunks"] = in.chunks;
    r["input_chunks_differ"] = in.differ;
    r["input_bytes_differ"] = in.bytes;
    r["output_chunks_differ"] = out.differ;
    r["output_bytes_differ"] = out.bytes;
    regions.push_back(r);
  }
  doc["regions"] = regions;
  doc["regions_same"] = same_regions;
  identical = identical && regions.empty();
  doc["identical"] = identical;
  return doc;
}

absl::Status CmdDiff(Connection& c, Output o, const std::string& a, const std::string& b) {
  v1::CaptureDetail da, db;
  for (auto [id, d] : {std::pair{&a, &da}, std::pair{&b, &db}}) {
    v1::GetCaptureRequest req;
    req.set_capture_id(*id);
    auto ctx = c.NewContext(true);
    KC_RETURN_IF_ERROR(c.Check(c.stub().GetCapture(ctx.get(), req, d)));
  }
  const nlohmann::json doc = DiffManifests(da.manifest(), db.manifest());
  if (o.structured()) {
    Emit(o, doc);
    return absl::OkStatus();
  }
  if (o.ids_only()) {  // the two ids when they differ, nothing when identical
    if (!doc["identical"].get<bool>()) {
      Ids(o, "capture", {doc["a"].get<std::string>(), doc["b"].get<std::string>()});
    }
    return absl::OkStatus();
  }
  std::ostream& out = o.out;
  const std::string ida = doc["a"].get<std::string>();
  const std::string idb = doc["b"].get<std::string>();
  out << "a = " << ida << "\nb = " << idb << "\n";
  const auto& k = doc["kernel"];
  out << "kernel     "
      << (k["same"].get<bool>() ? absl::StrCat("same: ", k["a"].get<std::string>())
                                : absl::StrCat(k["a"].get<std::string>(), " -> ",
                                               k["b"].get<std::string>()))
      << (k["code_object_same"].get<bool>() ? "" : "  (code objects differ)") << "\n";
  if (doc["launch"].empty()) {
    out << "launch     same\n";
  } else {
    std::vector<std::string> parts;
    for (const auto& f : doc["launch"]) {
      parts.push_back(absl::StrCat(f["field"].get<std::string>(), " ", f["a"].get<std::string>(),
                                   " -> ", f["b"].get<std::string>()));
    }
    out << "launch     " << absl::StrJoin(parts, ", ") << "\n";
  }
  if (doc["arguments"].empty()) {
    out << "arguments  same (" << doc["arguments_compared"].get<int>() << " compared)\n";
  } else {
    out << "arguments  " << doc["arguments"].size() << " of "
        << doc["arguments_compared"].get<int>() << " differ\n";
    for (const auto& arg : doc["arguments"]) {
      out << "  " << (arg["index"].is_null() ? std::string("blob")
                                             : absl::StrCat("#", arg["index"].get<int>()))
          << (arg["name"].get<std::string>().empty() ? "" : " " + arg["name"].get<std::string>())
          << " (offset " << arg["offset"].get<uint64_t>() << ", " << arg["size"].get<uint64_t>()
          << " B): " << arg["a"].get<std::string>() << " -> " << arg["b"].get<std::string>()
          << "\n";
    }
  }
  const uint64_t same = doc["regions_same"].get<uint64_t>();
  if (doc["regions"].empty()) {
    out << "memory     same (" << same << " regions, inputs and outputs)\n";
  } else {
    out << "memory     " << doc["regions"].size() << " regions differ, " << same << " same\n";
    Table t({"  REGION", "NAME", "SIZE", "INPUT DIFFERS", "OUTPUT DIFFERS"});
    t.AlignRight(2);
    for (const auto& r : doc["regions"]) {
      const std::string in = r["in"].get<std::string>();
      std::string name = r["name"].get<std::string>();
      if (name.empty()) name = "-";
      if (in != "both") {
        t.AddRow({"  " + r["va"].get<std::string>(), name, HumanBytes(r["size"].get<uint64_t>()),
                  "only in " + in, "only in " + in});
      } else if (r.contains("size_a")) {
        t.AddRow({"  " + r["va"].get<std::string>(), name,
                  absl::StrCat(HumanBytes(r["size_a"].get<uint64_t>()), " -> ", HumanBytes(r["size_b"].get<uint64_t>())),
                  "size differs", "size differs"});
      } else {
        auto cell = [&](const char* chunks, const char* bytes) {
          const uint64_t n = r[chunks].get<uint64_t>();
          return n == 0 ? std::string("-")
                        : absl::StrCat(n, "/", r["chunks"].get<uint64_t>(), " chunks (",
                                       HumanBytes(r[bytes].get<uint64_t>()), ")");
        };
        t.AddRow({"  " + r["va"].get<std::string>(), name, HumanBytes(r["size"].get<uint64_t>()),
                  cell("input_chunks_differ", "input_bytes_differ"),
                  cell("output_chunks_differ", "output_bytes_differ")});
      }
    }
    t.Print(o);
  }
  out << (doc["identical"].get<bool>() ? "identical\n" : "");
  return absl::OkStatus();
}

}  // namespace kerncap::ctl
