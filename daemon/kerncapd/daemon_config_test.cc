#include "daemon/kerncapd/daemon_config.h"

#include <unistd.h>

#include <sstream>

#include "common/file_util.h"
#include "gtest/gtest.h"

namespace kerncap::kerncapd {
namespace {

ParseOutcome Parse(std::vector<std::string> args, std::string* err_text = nullptr) {
  args.insert(args.begin(), "kerncapd");
  std::ostringstream out, err;
  ParseOutcome p = ParseDaemonConfig(args, out, err);
  if (err_text != nullptr) *err_text = err.str();
  return p;
}

TEST(DaemonConfigTest, DefaultsRun) {
  ParseOutcome p = Parse({});
  ASSERT_TRUE(p.run);
  EXPECT_FALSE(p.config.store_dir.empty());
  EXPECT_NE(p.config.socket.find("kerncapd.sock"), std::string::npos);
  EXPECT_NE(p.config.agent_socket.find("agent.sock"), std::string::npos);
  EXPECT_EQ(p.config.chunk_size, 1u << 20);
}

TEST(DaemonConfigTest, FlagsAndSizes) {
  ParseOutcome p = Parse({"--store=/tmp/s", "--socket=/tmp/s.sock", "--agent-socket=/tmp/a.sock",
                          "--chunk-size=256KiB", "--log-level=debug", "--workers=3"});
  ASSERT_TRUE(p.run);
  EXPECT_EQ(p.config.store_dir, "/tmp/s");
  EXPECT_EQ(p.config.chunk_size, 256u << 10);
  EXPECT_EQ(p.config.log_level, log::Level::kDebug);
  EXPECT_EQ(p.config.workers, 3);
}

TEST(DaemonConfigTest, StagingSizeGivesTheRingSlots) {
  ParseOutcome p = Parse({"--ring-slot-mib=64", "--staging-gib=66", "--staging-total-gib=100"});
  ASSERT_TRUE(p.run);
  EXPECT_EQ(p.config.ring_slots, 1056u);  // 66 GiB of 64 MiB slots
  EXPECT_EQ(p.config.staging_total_gib, 100.0);
  std::string err;
  EXPECT_EQ(Parse({"--ring-slot-mib=64", "--staging-gib=0.05"}, &err).exit_code, kExitUsage);
  EXPECT_NE(err.find("--staging-gib"), std::string::npos) << err;
  EXPECT_TRUE(Parse({"--ring-slots=4096"}).run);  // large rings are allowed
  // The total must hold at least one ring of 2 slots: it is never exceeded.
  EXPECT_EQ(Parse({"--ring-slot-mib=64", "--staging-total-gib=0.1"}, &err).exit_code, kExitUsage);
  EXPECT_NE(err.find("--staging-total-gib must hold"), std::string::npos) << err;
}

TEST(DaemonConfigTest, RejectsBadValues) {
  std::string err;
  EXPECT_EQ(Parse({"--chunk-size=1000"}, &err).exit_code, kExitUsage);
  EXPECT_NE(err.find("power of two"), std::string::npos) << err;
  EXPECT_EQ(Parse({"--log-level=loud"}).exit_code, kExitUsage);
  EXPECT_EQ(Parse({"--no-such-flag"}).exit_code, kExitUsage);
  // A type error is not reported as a range error, and ranges read as written.
  EXPECT_EQ(Parse({"--workers=abc"}, &err).exit_code, kExitUsage);
  EXPECT_NE(err.find("--workers: expected a whole number (0 to 1024), got \"abc\""),
            std::string::npos) << err;
  EXPECT_EQ(Parse({"--ring-slots=1"}, &err).exit_code, kExitUsage);
  EXPECT_NE(err.find("--ring-slots: must be 2 to 65536, got 1"), std::string::npos) << err;
  EXPECT_EQ(Parse({"--staging-gib=lots"}, &err).exit_code, kExitUsage);
  EXPECT_NE(err.find("--staging-gib: expected a number (0 to 1024), got \"lots\""),
            std::string::npos) << err;
  EXPECT_EQ(Parse({"--drain-timeout=-1"}, &err).exit_code, kExitUsage);
  EXPECT_NE(err.find("--drain-timeout: must be 0 to 3600, got -1"), std::string::npos) << err;
  EXPECT_EQ(err.find("e+"), std::string::npos) << err;
  EXPECT_EQ(kExitUsage, 2);  // the shared table (docs/EXIT_CODES.md), no longer EX_USAGE 64
  EXPECT_EQ(Parse({"--socket=/tmp/x", "--agent-socket=/tmp/x"}).exit_code, kExitUsage);
}

// Issue 28: the bounds that keep one peer from stalling the others have
// flags, sane defaults and validation naming the flag.
TEST(DaemonConfigTest, PeerBoundsHaveDefaultsAndAreValidated) {
  ParseOutcome d = Parse({});
  ASSERT_TRUE(d.run);
  EXPECT_EQ(d.config.max_arms, 1024u);
  EXPECT_EQ(d.config.max_arms_per_user, 64u);
  EXPECT_EQ(d.config.fanout_timeout_ms, 5000u);
  EXPECT_EQ(d.config.census_mib_per_agent, 32u);
  EXPECT_EQ(d.config.census_total_mib, 96u);
  ParseOutcome p = Parse({"--max-arms=10", "--max-arms-per-user=2", "--fanout-timeout=250",
                          "--census-mib-per-agent=4", "--census-total-mib=8"});
  ASSERT_TRUE(p.run);
  EXPECT_EQ(p.config.max_arms, 10u);
  EXPECT_EQ(p.config.max_arms_per_user, 2u);
  EXPECT_EQ(p.config.fanout_timeout_ms, 250u);
  EXPECT_EQ(p.config.census_mib_per_agent, 4u);
  EXPECT_EQ(p.config.census_total_mib, 8u);
  std::string err;
  EXPECT_FALSE(Parse({"--max-arms=4", "--max-arms-per-user=5"}, &err).run);
  EXPECT_NE(err.find("--max-arms-per-user"), std::string::npos) << err;
  EXPECT_FALSE(Parse({"--max-arms=0"}, &err).run);
  EXPECT_FALSE(Parse({"--fanout-timeout=0"}, &err).run);
  EXPECT_FALSE(Parse({"--census-mib-per-agent=500"}, &err).run);
  EXPECT_FALSE(Parse({"--census-mib-per-agent=50", "--census-total-mib=10"}, &err).run);
  EXPECT_NE(err.find("--census-mib-per-agent"), std::string::npos) << err;
  // With no --staging-total-gib, a bound applies anyway.
  EXPECT_GE(DefaultStagingTotalBytes(64u << 20), 64u << 20);
}

TEST(DaemonConfigTest, TcpNeedsTlsUnlessInsecure) {
  std::string err;
  ParseOutcome p = Parse({"--listen=0.0.0.0:7443"}, &err);
  EXPECT_FALSE(p.run);
  EXPECT_EQ(p.exit_code, kExitUsage);
  EXPECT_NE(err.find("without TLS"), std::string::npos) << err;
  EXPECT_TRUE(Parse({"--listen=127.0.0.1:7443", "--insecure-tcp"}).run);
  EXPECT_TRUE(Parse({"--listen=:7443", "--tls-cert=c.pem", "--tls-key=k.pem", "--token-file=t"}).run);
  EXPECT_FALSE(Parse({"--listen=:7443", "--tls-cert=c.pem"}).run);
  EXPECT_FALSE(
      Parse({"--listen=:7443", "--tls-cert=c", "--tls-key=k", "--require-client-cert"}).run);
  EXPECT_FALSE(Parse({"--tls-cert=c", "--tls-key=k"}).run);  // TLS without --listen
}

// TLS encrypts, but without a token or verified client certificates anyone
// who reaches the port controls the daemon: refused like plain TCP.
TEST(DaemonConfigTest, TlsWithoutClientAuthenticationIsRefusedUnlessAllowed) {
  const std::vector<std::string> tls = {"--listen=:7443", "--tls-cert=c.pem", "--tls-key=k.pem"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = tls;
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  };
  std::string err;
  ParseOutcome p = Parse(tls, &err);
  EXPECT_FALSE(p.run);
  EXPECT_EQ(p.exit_code, kExitUsage);
  EXPECT_NE(err.find("without authenticating clients"), std::string::npos) << err;
  EXPECT_TRUE(Parse(with({"--allow-unauthenticated-tls"})).run);
  EXPECT_TRUE(Parse(with({"--token-file=t"})).run);
  EXPECT_TRUE(Parse(with({"--tls-client-ca=ca.pem", "--require-client-cert"})).run);
  // A client CA alone would verify only the certificates clients choose to
  // send, admitting every client that sends none.
  p = Parse(with({"--tls-client-ca=ca.pem", "--token-file=t"}), &err);
  EXPECT_FALSE(p.run);
  EXPECT_NE(err.find("--tls-client-ca without --require-client-cert"), std::string::npos) << err;
  EXPECT_FALSE(Parse(with({"--tls-client-ca=ca.pem", "--allow-unauthenticated-tls"})).run);
}

TEST(DaemonConfigTest, ConfigFileAndCommandLinePrecedence) {
  std::string path = testing::TempDir() + "/kerncapd-" + std::to_string(::getpid()) + ".toml";
  ASSERT_TRUE(WriteFileAtomic(path,
                              "store = \"/srv/kerncap\"\n"
                              "log-level = \"warn\"\n"
                              "ring-slots = 16\n")
                  .ok());
  ParseOutcome p = Parse({"--config=" + path, "--log-level=error"});
  ASSERT_TRUE(p.run);
  EXPECT_EQ(p.config.store_dir, "/srv/kerncap");
  EXPECT_EQ(p.config.ring_slots, 16u);
  EXPECT_EQ(p.config.log_level, log::Level::kError);  // the command line wins
  EXPECT_EQ(p.config.config_file, path);
  ::unlink(path.c_str());
  EXPECT_EQ(Parse({"--config=" + path}).exit_code, kExitUsage);  // missing file
}

// A key that names no option fails the file instead of being dropped.
TEST(DaemonConfigTest, UnknownKeysAndGarbageLinesFailTheConfigFile) {
  std::string path = testing::TempDir() + "/kerncapd-x-" + std::to_string(::getpid()) + ".toml";
  for (const char* text : {"tokne-file = \"/t\"\n", "log-level = \"warn\"\n%%garbage%%\n"}) {
    ASSERT_TRUE(WriteFileAtomic(path, text).ok());
    std::string err;
    EXPECT_EQ(Parse({"--config=" + path}, &err).exit_code, kExitUsage) << text;
    EXPECT_FALSE(err.empty());
  }
  ::unlink(path.c_str());
}

// Relative paths are resolved once against the directory kerncapd starts in.
TEST(DaemonConfigTest, RelativeSocketAndStorePathsBecomeAbsolute) {
  char cwd[4096];
  ASSERT_NE(::getcwd(cwd, sizeof(cwd)), nullptr);
  ParseOutcome p = Parse({"--socket=run/ctl.sock", "--agent-socket=./a.sock", "--store=s"});
  ASSERT_TRUE(p.run);
  EXPECT_EQ(p.config.socket, std::string(cwd) + "/run/ctl.sock");
  EXPECT_EQ(p.config.agent_socket, std::string(cwd) + "/a.sock");
  EXPECT_EQ(p.config.store_dir, std::string(cwd) + "/s");
}

TEST(DaemonConfigTest, HelpAndVersionExitZero) {
  ParseOutcome p = Parse({"--help"});
  EXPECT_FALSE(p.run);
  EXPECT_EQ(p.exit_code, kExitOk);
  EXPECT_EQ(Parse({"--version"}).exit_code, kExitOk);
}

}  // namespace
}  // namespace kerncap::kerncapd
