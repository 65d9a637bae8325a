// End to end: real kerncapd processes on temp stores and sockets, driven by
// the real kerncapctl binary. Checks exit codes and the transfer paths
// (.kcap export/import, dedup-aware pull, corrupt file rejected).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "tests/integration/kerncapctl_test_util.h"
#include "daemon/store/store_test_util.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace kerncap::ctl {
namespace {

using testing::BinDir;
using testing::Daemon;
using testing::Result;
using testing::SeedStore;
using testing::Sh;
using testing::TempDir;

TEST(KerncapctlEndToEndTest, StatusShowExportImportPullAndExitCodes) {
  TempDir tmp;
  std::vector<std::string> ids = SeedStore(tmp.Sub("a-store"));
  Daemon a(tmp, "a");
  Daemon b(tmp, "b");

  Result r = Sh(a.Ctl("status --json"));
  ASSERT_EQ(r.rc, 0) << r.out;
  auto st = nlohmann::json::parse(r.out);
  EXPECT_EQ(st["unix_socket"], a.socket());
  EXPECT_EQ(st["store"]["captures"], 2);  // docs/JSON.md: integers are numbers

  r = Sh(a.Ctl("captures --tag run=r1 --json"));
  ASSERT_EQ(r.rc, 0);
  EXPECT_EQ(nlohmann::json::parse(r.out)["captures"][0]["capture_id"], ids[1]);

  r = Sh(a.Ctl("show " + ids[0]));
  ASSERT_EQ(r.rc, 0) << r.out;
  if (std::getenv("KERNCAP_E2E_VERBOSE") != nullptr) std::cout << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "memory map")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "0x7f0000100000")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "100.0%")) << r.out;  // the all-zero region
  EXPECT_TRUE(absl::StrContains(r.out, "memory read")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "free device memory too small")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "by fingerprint")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "0.250 s")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "texture 0x5 at argument offset(s) 8: linear 4096 bytes "
                                       "at 0x7f0000000000, format 0x20 x1"))
      << r.out;

  // Exit codes.
  EXPECT_EQ(Sh(a.Ctl("show cap-000000000000 2>/dev/null")).rc, 3);
  EXPECT_EQ(Sh(a.Ctl("show ../etc 2>/dev/null")).rc, 2);
  EXPECT_EQ(Sh(a.Ctl("frobnicate 2>/dev/null")).rc, 2);
  EXPECT_EQ(
      Sh(absl::StrCat(BinDir(), "/kerncapctl --socket=", tmp.Sub("none.sock"), " status 2>&1")).rc,
      4);
  // A synthetic capture without code object cannot become a reproducer;
  // nothing is left at --out.
  r = Sh(a.Ctl("repro " + ids[0] + " --out " + tmp.Sub("repro") + " 2>&1"));
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "cannot tell CUDA from HIP")) << r.out;
  EXPECT_FALSE(std::filesystem::exists(tmp.Sub("repro")));

  // export -> corrupt copy refused -> import.
  std::string kcap = tmp.Sub("cap.kcap");
  r = Sh(a.Ctl("export " + ids[0] + " --out " + kcap));
  ASSERT_EQ(r.rc, 0) << r.out;
  std::string bytes;
  {
    std::ifstream in(kcap, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  ASSERT_GT(bytes.size(), 1000u);
  std::string bad = tmp.Sub("bad.kcap");
  {
    std::string flipped = bytes;
    flipped[flipped.size() / 2] ^= 0x11;
    std::ofstream(bad, std::ios::binary) << flipped;
  }
  EXPECT_EQ(Sh(b.Ctl("import " + bad + " 2>/dev/null")).rc, 5);
  { std::ofstream(tmp.Sub("short.kcap"), std::ios::binary) << bytes.substr(0, bytes.size() - 30); }
  EXPECT_EQ(Sh(b.Ctl("import " + tmp.Sub("short.kcap") + " 2>/dev/null")).rc, 5);
  EXPECT_EQ(Sh(b.Ctl("captures --json")).out, "{\"captures\":[]}\n");
  r = Sh(b.Ctl("import " + kcap + " --json"));
  ASSERT_EQ(r.rc, 0) << r.out;
  auto imported = nlohmann::json::parse(r.out);
  EXPECT_EQ(imported["capture_id"], ids[0]);
  EXPECT_GT(imported["chunks_received"].get<uint64_t>(), 0u);

  // Pull the second capture: every chunk is already on b.
  r = Sh(b.Ctl("pull " + ids[1] + " --from unix:" + a.socket() + " --json"));
  ASSERT_EQ(r.rc, 0) << r.out;
  auto pulled = nlohmann::json::parse(r.out);
  EXPECT_EQ(pulled["capture_id"], ids[1]);
  EXPECT_EQ(pulled["chunks_received"], 0);

  EXPECT_EQ(Sh(b.Ctl("verify --rehash")).rc, 0);
  EXPECT_EQ(Sh(b.Ctl("rm " + ids[0])).rc, 0);
  EXPECT_EQ(Sh(b.Ctl("gc")).rc, 0);

  // A second daemon on a's store refuses to start (exit 7, conflict).
  r = Sh(absl::StrCat(BinDir(), "/kerncapd --store=", tmp.Sub("a-store"), " --socket=",
                      tmp.Sub("c.sock"), " --agent-socket=", tmp.Sub("c-agent.sock"), " 2>&1"));
  EXPECT_EQ(r.rc, 7);
  EXPECT_TRUE(absl::StrContains(r.out, "locked")) << r.out;

  EXPECT_EQ(a.Stop(), 0);
  EXPECT_EQ(b.Stop(), 0);
  EXPECT_FALSE(std::filesystem::exists(a.socket()));
}

// The output options and the JSON policy, against a real daemon.
TEST(KerncapctlEndToEndTest, OutputFormatsAndJsonPolicy) {
  TempDir tmp;
  std::vector<std::string> ids = SeedStore(tmp.Sub("a-store"));
  Daemon a(tmp, "a");

  // show -o json: numbers, "0x..." addresses, short enum names, hex digests.
  Result r = Sh(a.Ctl("show " + ids[0] + " -o json"));
  ASSERT_EQ(r.rc, 0) << r.out;
  auto d = nlohmann::json::parse(r.out);
  const auto& m = d["manifest"];
  EXPECT_TRUE(m["created_unix_ms"].is_number_integer()) << m["created_unix_ms"];
  EXPECT_TRUE(m["dispatch_index"].is_number_integer());
  ASSERT_FALSE(m["pre"]["regions"].empty());
  for (const auto& region : m["pre"]["regions"]) {
    ASSERT_TRUE(region["va"].is_string());
    EXPECT_EQ(region["va"].get<std::string>().rfind("0x", 0), 0u) << region["va"];
    EXPECT_TRUE(region["data"]["size"].is_number_integer());
    EXPECT_EQ(region["kind"].get<std::string>().find("REGION_"), std::string::npos);
    for (const auto& dg : region["data"]["chunk_digests"]) {
      const std::string hex = dg.get<std::string>();
      EXPECT_TRUE(hex.empty() || hex.size() == 64) << hex;  // hex, not base64
      EXPECT_EQ(hex.find_first_not_of("0123456789abcdef"), std::string::npos) << hex;
    }
  }
  EXPECT_EQ(m["source"], "unspecified");  // the seeded manifests set none
  EXPECT_EQ(m["texture_objects"][0]["type"], "texture");
  EXPECT_EQ(m["texture_objects"][0]["handle"], "0x5");

  // -o yaml: the same document.
  r = Sh(a.Ctl("-o yaml status"));
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_TRUE(absl::StartsWith(r.out, "---\n")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "\n  captures: 2\n")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "api_version: \"kerncap.v1\"")) << r.out;

  // -q and -o name: ids only; --no-headers: no header row.
  r = Sh(a.Ctl("captures -q"));
  ASSERT_EQ(r.rc, 0);
  EXPECT_EQ(r.out, ids[1] + "\n" + ids[0] + "\n");  // newest first
  r = Sh(a.Ctl("captures -o name"));
  EXPECT_EQ(r.out, "capture/" + ids[1] + "\ncapture/" + ids[0] + "\n");
  r = Sh(a.Ctl("captures --no-headers"));
  EXPECT_FALSE(absl::StrContains(r.out, "CAPTURE")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, ids[0])) << r.out;
  r = Sh(a.Ctl("captures -o wide"));
  EXPECT_TRUE(absl::StrContains(r.out, "PLATFORM")) << r.out;

  // --since/--until: the seeded captures are from now.
  EXPECT_EQ(Sh(a.Ctl("captures --since=1h -q")).out, ids[1] + "\n" + ids[0] + "\n");
  EXPECT_EQ(Sh(a.Ctl("captures --until=1h -q")).out, "");
  EXPECT_EQ(Sh(a.Ctl("captures --since=2000-01-01 --until=2000-01-02 -q")).out, "");
  r = Sh(a.Ctl("captures --since=yesterday 2>&1"));
  EXPECT_EQ(r.rc, 2);
  EXPECT_TRUE(absl::StrContains(r.out, "--since: expected a duration ago")) << r.out;

  // version: client and daemon.
  r = Sh(a.Ctl("version --json"));
  ASSERT_EQ(r.rc, 0) << r.out;
  auto v = nlohmann::json::parse(r.out);
  EXPECT_EQ(v["client"]["api_version"], "kerncap.v1");
  EXPECT_EQ(v["daemon"]["api_version"], "kerncap.v1");
  EXPECT_EQ(v["daemon"]["store_format"], 1);
  EXPECT_EQ(v["daemon"]["version"], v["client"]["version"]);

  // Errors with --json: one object on stderr, nothing on stdout.
  r = Sh(a.Ctl("show cap-000000000000 --json 2>&1 >/dev/null"));
  EXPECT_EQ(r.rc, 3);
  auto err = nlohmann::json::parse(r.out);
  EXPECT_EQ(err["error"]["code"], "not_found");
  EXPECT_EQ(err["error"]["exit_code"], 3);
  EXPECT_EQ(Sh(a.Ctl("show cap-000000000000 --json 2>/dev/null")).out, "");

  // rm of several ids: all are tried, the first failure is the exit code.
  r = Sh(a.Ctl("rm " + ids[0] + " cap-000000000000 " + ids[1] + " -o json 2>/dev/null"));
  EXPECT_EQ(r.rc, 3) << r.out;
  auto rm = nlohmann::json::parse(r.out);
  EXPECT_EQ(rm["deleted"], nlohmann::json::array({ids[0], ids[1]}));
  EXPECT_EQ(rm["failed"][0]["capture_id"], "cap-000000000000");
  EXPECT_EQ(Sh(a.Ctl("captures -q")).out, "");
  EXPECT_EQ(a.Stop(), 0);
}

// The habits users bring (issue 30): -q / -o name on every command, field
// selectors and --sort-by, `-` for export and import, a key-only --tag, diff.
TEST(KerncapctlEndToEndTest, HabitsUsersBring) {
  TempDir tmp;
  std::vector<std::string> ids = SeedStore(tmp.Sub("a-store"));
  Daemon a(tmp, "a");
  Daemon b(tmp, "b");

  // -q on the commands that ignored it: status names nothing (a liveness
  // check), show the whole id of a prefix, gc and verify nothing when fine.
  Result r = Sh(a.Ctl("status -q"));
  EXPECT_EQ(r.rc, 0);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(Sh(a.Ctl("show " + ids[0].substr(0, 10) + " -q")).out, ids[0] + "\n");
  EXPECT_EQ(Sh(a.Ctl("show " + ids[0] + " -o name")).out, "capture/" + ids[0] + "\n");
  EXPECT_EQ(Sh(a.Ctl("gc -q")).out, "");
  r = Sh(a.Ctl("verify -q"));
  EXPECT_EQ(r.rc, 0);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(Sh(a.Ctl("version -q")).out, "");

  // A bare tag key, as the help offers.
  r = Sh(a.Ctl("captures --tag run -q"));
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_EQ(r.out, ids[1] + "\n" + ids[0] + "\n");
  EXPECT_EQ(Sh(a.Ctl("captures --tag nosuchkey -q")).out, "");

  // --sort-by, jsonpath and custom-columns over the -o json document.
  r = Sh(a.Ctl("captures --sort-by=created_unix_ms -q"));
  EXPECT_EQ(r.out, ids[0] + "\n" + ids[1] + "\n") << r.out;
  r = Sh(a.Ctl("captures --sort-by=created_unix_ms -o 'jsonpath={.captures[*].capture_id}'"));
  EXPECT_EQ(r.out, ids[0] + " " + ids[1] + "\n") << r.out;
  r = Sh(a.Ctl("captures --sort-by=created_unix_ms -o 'jsonpath={.captures[0].tags.run}\\n'"));
  EXPECT_EQ(r.out, "r0\n\n") << r.out;
  r = Sh(a.Ctl("captures --sort-by=created_unix_ms -o custom-columns=ID:capture_id,RUN:tags.run,"
               "NONE:no_such_field"));
  EXPECT_EQ(r.out, absl::StrCat("ID                RUN  NONE\n", ids[0], "  r0   <none>\n", ids[1],
                                "  r1   <none>\n"))
      << r.out;
  r = Sh(a.Ctl("captures --sort-by=no_such_field 2>&1"));
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "no item has the field")) << r.out;

  // export --out - | import -: the same capture, byte for byte, on b; the
  // summary goes to stderr so stdout carries only the file.
  r = Sh(a.Ctl("export " + ids[0] + " --out - 2>" + tmp.Sub("export.err") + " | " +
               b.Ctl("import - -q")));
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_EQ(r.out, ids[0] + "\n");
  std::string err;
  {
    std::ifstream in(tmp.Sub("export.err"));
    err.assign(std::istreambuf_iterator<char>(in), {});
  }
  EXPECT_TRUE(absl::StrContains(err, "exported " + ids[0] + " to stdout")) << err;
  ASSERT_EQ(Sh(a.Ctl("export " + ids[0] + " --out " + tmp.Sub("file.kcap"))).rc, 0);
  ASSERT_EQ(Sh(a.Ctl("export " + ids[0] + " --out - > " + tmp.Sub("stdout.kcap") + " 2>/dev/null")).rc,
            0);
  EXPECT_EQ(Sh("cmp " + tmp.Sub("file.kcap") + " " + tmp.Sub("stdout.kcap")).rc, 0);
  // A damaged stream is refused whole.
  r = Sh("head -c 3000 " + tmp.Sub("file.kcap") + " | " + b.Ctl("import - 2>&1"));
  EXPECT_EQ(r.rc, 5) << r.out;

  // diff: the two seeded captures differ in their arguments and memory.
  r = Sh(a.Ctl("diff " + ids[0] + " " + ids[1] + " -o json"));
  ASSERT_EQ(r.rc, 0) << r.out;
  auto d = nlohmann::json::parse(r.out);
  EXPECT_FALSE(d["identical"].get<bool>()) << r.out;
  EXPECT_TRUE(d["kernel"]["same"].get<bool>()) << r.out;
  r = Sh(a.Ctl("diff " + ids[0] + " " + ids[0]));
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "identical")) << r.out;
  EXPECT_EQ(Sh(a.Ctl("diff " + ids[0] + " " + ids[0] + " -q")).out, "");
  r = Sh(a.Ctl("diff " + ids[0] + " " + ids[1]));
  EXPECT_TRUE(absl::StrContains(r.out, "kernel     same: matmul(float*, float*)")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "arguments")) << r.out;
  EXPECT_EQ(Sh(a.Ctl("diff " + ids[0] + " 2>/dev/null")).rc, 2);
  EXPECT_EQ(a.Stop(), 0);
  EXPECT_EQ(b.Stop(), 0);
}

// Contexts: a config file names the daemon; flags win over it.
TEST(KerncapctlEndToEndTest, ContextsReachTheDaemon) {
  TempDir tmp;
  std::vector<std::string> ids = SeedStore(tmp.Sub("a-store"));
  Daemon a(tmp, "a");
  const std::string ctl = absl::StrCat("KERNCAP_CONFIG=", tmp.Sub("cfg/config.toml"), " ",
                                       BinDir(), "/kerncapctl --socket=", tmp.Sub("none.sock"));
  // Without a context the (wrong) --socket is used.
  EXPECT_EQ(Sh(ctl + " status 2>/dev/null").rc, 4);
  Result r = Sh(ctl + " config set-context a --socket=" + a.socket() + " --use");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "created context a")) << r.out;
  // The explicit --socket still wins over the current context...
  EXPECT_EQ(Sh(ctl + " status 2>/dev/null").rc, 4);
  // ...and without it the context is used.
  const std::string ctl_ctx = absl::StrCat("KERNCAP_CONFIG=", tmp.Sub("cfg/config.toml"), " ",
                                           BinDir(), "/kerncapctl");
  r = Sh(ctl_ctx + " captures -q");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_EQ(r.out, ids[1] + "\n" + ids[0] + "\n");
  EXPECT_EQ(Sh(ctl_ctx + " --context=a captures -q").out, r.out);
  r = Sh(ctl_ctx + " --context=nope status 2>&1");
  EXPECT_EQ(r.rc, 3);
  EXPECT_TRUE(absl::StrContains(r.out, "no context \"nope\"")) << r.out;
  r = Sh(ctl_ctx + " config get-contexts");
  EXPECT_TRUE(absl::StrContains(r.out, "*        a")) << r.out;
  EXPECT_EQ(Sh(ctl_ctx + " config current-context").out, "a\n");
  // A broken file stops the commands that read it, naming the file and line.
  { std::ofstream(tmp.Sub("cfg/config.toml"), std::ios::app) << "bogus = 1\n"; }
  r = Sh(ctl_ctx + " status 2>&1");
  EXPECT_EQ(r.rc, 2);
  EXPECT_TRUE(absl::StrContains(r.out, "config.toml:")) << r.out;
  EXPECT_EQ(a.Stop(), 0);
}

// repro CAPTURE-ID: kerncapd generates, kerncapctl receives and writes --out.
TEST(KerncapctlEndToEndTest, ReproThroughDaemon) {
  TempDir tmp;
  std::string id;
  {
    auto s = store::Store::Open(store::testing::SmallOptions(tmp.Sub("a-store")));
    ASSERT_TRUE(s.ok()) << s.status();
    auto ingest = (*s)->BeginCapture();
    ASSERT_TRUE(ingest.ok());
    std::string code = store::testing::RandomBytes((5 << 20) + 7, 9);  // > one stream piece
    v1::CodeObject co;
    co.set_format(v1::CODE_OBJECT_CUBIN);
    ASSERT_TRUE((*ingest)->AddCodeObject(co, code.data(), code.size()).ok());
    v1::CaptureManifest m;
    m.mutable_kernel()->set_mangled_name("_Z4gemmv");
    m.mutable_kernel()->set_platform(v1::PLATFORM_CUDA);
    m.mutable_kernel()->set_arch("sm_90");
    auto committed = (*ingest)->Commit(std::move(m));
    ASSERT_TRUE(committed.ok()) << committed.status();
    id = *committed;
  }
  Daemon a(tmp, "a");
  const std::string out = tmp.Sub("proj");
  Result r = Sh(a.Ctl("--json repro " + id + " --out " + out));
  ASSERT_EQ(r.rc, 0) << r.out;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["out_dir"], out);
  EXPECT_EQ(j["project"]["kind"], "binary");
  EXPECT_EQ(std::filesystem::file_size(out + "/code/kernel.cubin"), (5u << 20) + 7);
  EXPECT_TRUE(std::filesystem::exists(out + "/capture.kcap"));
  EXPECT_TRUE(std::filesystem::exists(out + "/kerncap.json"));
  EXPECT_TRUE(std::filesystem::exists(out + "/Makefile"));
  // Refused without --force, the folder unchanged; replaced with it.
  r = Sh(a.Ctl("repro " + id + " --out " + out + " 2>&1"));
  EXPECT_NE(r.rc, 0);
  EXPECT_TRUE(absl::StrContains(r.out, "--force")) << r.out;
  r = Sh(a.Ctl("repro " + id.substr(0, 8) + " --out " + out + " --force"));
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "reproducer written to " + out)) << r.out;
}

TEST(KerncapctlEndToEndTest, TlsAndBearerTokenOnTcp) {
  if (Sh("openssl version >/dev/null 2>&1").rc != 0) GTEST_SKIP() << "no openssl binary";
  TempDir tmp;
  std::string cert = tmp.Sub("cert.pem");
  std::string key = tmp.Sub("key.pem");
  Result gen = Sh(absl::StrCat(
      "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost ",
      "-addext subjectAltName=DNS:localhost,IP:127.0.0.1 -keyout ", key, " -out ", cert, " 2>&1"));
  ASSERT_EQ(gen.rc, 0) << gen.out;
  std::string token = tmp.Sub("token");
  std::ofstream(token) << "first-token\n";
  // A port unlikely to collide: derived from the pid.
  int port = 20000 + ::getpid() % 20000;
  std::string listen = absl::StrCat("127.0.0.1:", port);
  Daemon d(
      tmp, "tls",
      {"--listen=" + listen, "--tls-cert=" + cert, "--tls-key=" + key, "--token-file=" + token});
  std::string base = absl::StrCat(BinDir(), "/kerncapctl --host=localhost:", port,
                                  " --tls-ca=", cert, " --timeout=5");
  Result r;
  for (int i = 0; i < 50; ++i) {
    r = Sh(base + " --token-file=" + token + " status --json 2>&1");
    if (r.rc != 4) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_EQ(nlohmann::json::parse(r.out)["tcp_listen"], listen);
  EXPECT_EQ(Sh(base + " status 2>/dev/null").rc, 6);  // no token
  std::string wrong = tmp.Sub("wrong");
  std::ofstream(wrong) << "nope\n";
  EXPECT_EQ(Sh(base + " --token-file=" + wrong + " status 2>/dev/null").rc, 6);
  // A CA that did not sign the daemon's certificate: an authentication
  // failure (exit 6) in kerncapctl's words, without gRPC's raw log line.
  std::string other_ca = tmp.Sub("other-ca.pem");
  ASSERT_EQ(Sh(absl::StrCat("openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=other ",
                            "-keyout ", tmp.Sub("other.key"), " -out ", other_ca, " 2>&1"))
                .rc,
            0);
  r = Sh(absl::StrCat(BinDir(), "/kerncapctl --host=localhost:", port, " --tls-ca=", other_ca,
                      " --token-file=", token, " --timeout=5 status 2>&1"));
  EXPECT_EQ(r.rc, 6) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "TLS handshake with kerncapd failed")) << r.out;
  EXPECT_FALSE(absl::StrContains(r.out, "ssl_transport_security")) << r.out;
  EXPECT_FALSE(absl::StrContains(r.out, "is kerncapd running")) << r.out;
  // Plaintext against the TLS port fails to connect.
  EXPECT_EQ(Sh(absl::StrCat(BinDir(), "/kerncapctl --host=localhost:", port,
                            " --insecure --timeout=2 status 2>/dev/null"))
                .rc,
            4);
  // SIGHUP re-reads the token file.
  std::ofstream(token) << "second-token\n";
  std::ofstream(tmp.Sub("old")) << "first-token\n";
  d.Signal(SIGHUP);
  bool rotated = false;
  for (int i = 0; i < 50 && !rotated; ++i) {
    rotated = Sh(base + " --token-file=" + tmp.Sub("old") + " status 2>/dev/null").rc == 6;
    if (!rotated) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(rotated);
  EXPECT_EQ(Sh(base + " --token-file=" + token + " status >/dev/null 2>&1").rc, 0);
  // The Unix socket needs no token.
  EXPECT_EQ(Sh(d.Ctl("status >/dev/null")).rc, 0);
  EXPECT_EQ(d.Stop(), 0);
}

TEST(KerncapdTest, RefusesPlainTcpWithoutInsecureFlag) {
  TempDir tmp;
  Result r = Sh(absl::StrCat(BinDir(), "/kerncapd --store=", tmp.Sub("s"),
                             " --socket=", tmp.Sub("s.sock"), " --listen=127.0.0.1:7443 2>&1"));
  EXPECT_EQ(r.rc, 2);  // usage (docs/EXIT_CODES.md; was 64)
  EXPECT_TRUE(absl::StrContains(r.out, "without TLS")) << r.out;
}

// A relative --socket names a path under the current directory, for kerncapd
// and kerncapctl alike (it used to read as a host name in kerncapctl).
TEST(KerncapctlEndToEndTest, RelativeSocketPathsWork) {
  TempDir tmp;
  const std::string bin = std::filesystem::absolute(BinDir()).string();
  const std::string dir = tmp.path();
  std::filesystem::create_directories(dir + "/cwd");
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (::chdir((dir + "/cwd").c_str()) != 0) std::_Exit(126);
    FILE* f = std::freopen((dir + "/kerncapd.log").c_str(), "w", stderr);
    (void)f;
    const std::string kerncapd = bin + "/kerncapd";
    ::execl(kerncapd.c_str(), kerncapd.c_str(), "--store=store", "--socket=run/ctl.sock",
            "--agent-socket=./run/agent.sock", "--chunk-size=64KiB", "--drain-timeout=2",
            static_cast<char*>(nullptr));
    std::_Exit(127);
  }
  const std::string sock = dir + "/cwd/run/ctl.sock";
  for (int i = 0; i < 200 && !std::filesystem::exists(sock); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_TRUE(std::filesystem::exists(sock));
  // From the daemon's folder, from below it and with unix: in front.
  Result r = Sh("cd " + dir + "/cwd && " + bin + "/kerncapctl --socket=run/ctl.sock status --json 2>&1");
  ASSERT_EQ(r.rc, 0) << r.out;
  nlohmann::json status = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_TRUE(status.is_object()) << r.out;
  EXPECT_EQ(status.value("unix_socket", ""), sock) << r.out;  // absolute in the daemon
  EXPECT_EQ(status.value("agent_socket", ""), dir + "/cwd/run/agent.sock") << r.out;
  r = Sh("cd " + dir + "/cwd/run && " + bin + "/kerncapctl --socket=ctl.sock status 2>&1");
  EXPECT_EQ(r.rc, 0) << r.out;
  r = Sh("cd " + dir + "/cwd && " + bin + "/kerncapctl --socket=unix:./run/ctl.sock status 2>&1");
  EXPECT_EQ(r.rc, 0) << r.out;
  // A relative path that names nothing says so (not "bad endpoint").
  r = Sh("cd " + dir + " && " + bin + "/kerncapctl --socket=run/ctl.sock status 2>&1");
  EXPECT_EQ(r.rc, 4) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "no kerncapd socket at " + dir + "/run/ctl.sock")) << r.out;
  ::kill(pid, SIGTERM);
  int wstatus = 0;
  ::waitpid(pid, &wstatus, 0);
  EXPECT_TRUE(WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0);
  EXPECT_FALSE(std::filesystem::exists(sock));  // removed at exit by its absolute path
}

}  // namespace
}  // namespace kerncap::ctl
