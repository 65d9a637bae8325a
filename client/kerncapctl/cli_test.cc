// kerncapctl's command line through the real binary (no daemon needed):
// per-command help, suggestions for mistyped commands, type and range errors,
// help topics, completion scripts, version without a daemon, JSON errors.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace kerncap::ctl {
namespace {

struct Result {
  int exit_code = -1;
  std::string out;
};

// `kerncapctl ARGS` with the socket pointed at nothing and no contexts file.
Result Ctl(const std::string& args, const std::string& redirect = "2>&1") {
  std::string cmd = absl::StrCat("env KERNCAP_CONFIG=/nonexistent/kerncap.toml ",
                                 "KERNCAP_SOCKET=/nonexistent/kerncapd.sock ", KERNCAP_KERNCAPCTL,
                                 " ", args, " ", redirect);
  Result r;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) r.out.append(buf, n);
  int status = ::pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

TEST(CliTest, CommandHelpHasOptionsDefaultsGlobalsAndExamplesWithoutAbsolutePaths) {
  Result r = Ctl("arm --help");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_TRUE(absl::StartsWith(r.out, "capture the next dispatch(es) of a kernel\nUsage: kerncapctl arm"))
      << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "--match TEXT=substring")) << r.out;  // default shown
  EXPECT_TRUE(absl::StrContains(r.out, "--count UINT=1")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "Global options")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "--context NAME")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "Examples:\n  kerncapctl arm --kernel=matmul")) << r.out;
  EXPECT_FALSE(absl::StrContains(r.out, KERNCAP_KERNCAPCTL)) << r.out;
  // Not the whole program's footer.
  EXPECT_FALSE(absl::StrContains(r.out, "kerncapctl export cap-7f3a")) << r.out;
  // Local-only commands do not list the connection options.
  Result c = Ctl("config set-context --help");
  EXPECT_EQ(c.exit_code, 0);
  EXPECT_FALSE(absl::StrContains(c.out, "--timeout SECONDS")) << c.out;
  EXPECT_EQ(Ctl("help arm").out, r.out);
}

TEST(CliTest, UnknownCommandsSuggestTheNearest) {
  Result r = Ctl("captrues");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(absl::StrContains(r.out, "unknown command \"captrues\"; did you mean \"captures\"?"))
      << r.out;
  EXPECT_TRUE(absl::StrContains(Ctl("--socket /x stauts").out, "did you mean \"status\"?"));
  r = Ctl("frobnicate");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_FALSE(absl::StrContains(r.out, "did you mean")) << r.out;
  r = Ctl("help selectros");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(absl::StrContains(r.out, "did you mean \"selectors\"?")) << r.out;
}

TEST(CliTest, TypeAndRangeErrorsSayWhatWasExpected) {
  Result r = Ctl("arm --kernel=x --device=-3");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(absl::StrContains(r.out, "--device: must be 0 to 2147483647, got -3")) << r.out;
  EXPECT_FALSE(absl::StrContains(r.out, "e+308")) << r.out;
  r = Ctl("arm --kernel=x --count=abc");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(absl::StrContains(r.out, "--count: expected a whole number (1 to 1000000), got \"abc\""))
      << r.out;
  r = Ctl("bench cap-1 --iterations=abc");
  EXPECT_TRUE(absl::StrContains(r.out, "--iterations: expected a whole number")) << r.out;
  r = Ctl("--timeout=soon status");
  EXPECT_TRUE(absl::StrContains(r.out, "--timeout: expected a number (0 or more), got \"soon\"")) << r.out;
  r = Ctl("-o xml status");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(absl::StrContains(r.out, "xml")) << r.out;
  // Durations and times are checked while parsing: a usage error naming the
  // option, not a connection error (the socket here points at nothing).
  for (const char* args : {"arm --kernel=x --ttl=soon", "kernels --sample=soon",
                           "substitute --kernel=x --code-object=/dev/null --ttl=soon"}) {
    r = Ctl(args);
    EXPECT_EQ(r.exit_code, 2) << args << ": " << r.out;
    EXPECT_TRUE(absl::StrContains(r.out, "--ttl: bad duration \"soon\"") ||
                absl::StrContains(r.out, "--sample: bad duration \"soon\""))
        << args << ": " << r.out;
    EXPECT_FALSE(absl::StrContains(r.out, "no kerncapd socket")) << args << ": " << r.out;
  }
  r = Ctl("arm --kernel=x --ttl=-5s");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "--ttl: duration \"-5s\" must be positive")) << r.out;
  r = Ctl("captures --since=yesterday");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "--since: expected a duration ago (30m, 2h, 1d)")) << r.out;
  EXPECT_FALSE(absl::StrContains(r.out, "--since: --since") || absl::StrContains(r.out, ": :"))
      << r.out;  // the option is named once
  r = Ctl("captures --until=2026-13-45");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "--until: expected")) << r.out;
}

TEST(CliTest, ErrorsWithJsonAreOneObjectOnStderr) {
  Result r = Ctl("status --json", "2>&1 >/dev/null");
  EXPECT_EQ(r.exit_code, 4);  // no daemon at the socket
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["error"]["code"], "unavailable");
  EXPECT_EQ(j["error"]["exit_code"], 4);
  EXPECT_EQ(Ctl("status --json", "2>/dev/null").out, "");
  // A bad command line too.
  r = Ctl("--json captrues", "2>&1 >/dev/null");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(nlohmann::json::parse(r.out)["error"]["code"], "usage");
}

TEST(CliTest, MistypedOptionsSuggestTheNearest) {
  // Before this, --kernal was an extra and CLI11 said "--kernel is required".
  Result r = Ctl("arm --kernal=matmul");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "unknown option --kernal for arm; did you mean --kernel?"))
      << r.out;
  r = Ctl("captures --sinse=1h");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "did you mean --since?")) << r.out;
  // Global options are known after the command too; nested commands have theirs.
  EXPECT_EQ(Ctl("captures --no-headers -q").exit_code, 4);
  EXPECT_EQ(Ctl("config set-context x --hots=a:1").exit_code, 2);
  // JSON errors use the exit code's name.
  r = Ctl("arm --kernal=x -o json", "2>&1 >/dev/null");
  EXPECT_EQ(nlohmann::json::parse(r.out)["error"]["code"], "usage") << r.out;
}

TEST(CliTest, FieldSelectorsAndSortByAreCheckedBeforeAnyDaemon) {
  Result r = Ctl("captures -o 'jsonpath={.captures[*'");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "unclosed")) << r.out;
  r = Ctl("captures -o custom-columns=ID");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "HEADER:FIELD")) << r.out;
  EXPECT_EQ(Ctl("captures -o bogus").exit_code, 2);
  // Well-formed ones get as far as the (missing) daemon.
  EXPECT_EQ(Ctl("captures -o 'jsonpath={.captures[*].capture_id}'").exit_code, 4);
  EXPECT_EQ(Ctl("captures -o custom-columns=ID:capture_id --sort-by=created_unix_ms").exit_code, 4);
  r = Ctl("status --sort-by=pid");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "--sort-by orders the items of a list command")) << r.out;
}

TEST(CliTest, BenchHelpShowsEveryOptionWithItsDefault) {
  Result r = Ctl("bench --help");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_FALSE(absl::StrContains(r.out, "--warmup TEXT")) << r.out;
  EXPECT_FALSE(absl::StrContains(r.out, "--iterations TEXT")) << r.out;
  for (const char* s : {"--warmup N", "(default: 5)", "--iterations N", "(default: 50)",
                        "--code-object FILE", "--compare-original", "--no-compare-original",
                        "--compare-on WHERE", "--rtol X"}) {
    EXPECT_TRUE(absl::StrContains(r.out, s)) << s << "\n" << r.out;
  }
  r = Ctl("validate --help");
  EXPECT_TRUE(absl::StrContains(r.out, "--code-object FILE")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "--compare-on WHERE")) << r.out;
}

TEST(CliTest, SelectorHelpNamesRankAndPerShape) {
  Result r = Ctl("help selectors");
  EXPECT_TRUE(absl::StrContains(r.out, "--rank=N")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "--per-shape")) << r.out;
}

TEST(CliTest, KerncapSocketBeatsTheCurrentContext) {
  char dir[] = "/tmp/kc-cli-ctx-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::string cfg = std::string(dir) + "/config.toml";
  {
    std::ofstream f(cfg);
    f << "current-context = \"far\"\n\n[contexts.far]\nsocket = \"" << dir << "/far.sock\"\n";
  }
  auto run = [&](const std::string& env, const std::string& args) {
    std::string cmd = absl::StrCat("env ", env, " KERNCAP_CONFIG=", cfg, " ", KERNCAP_KERNCAPCTL,
                                   " ", args, " 2>&1");
    Result r;
    FILE* p = ::popen(cmd.c_str(), "r");
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) r.out.append(buf, n);
    int status = ::pclose(p);
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return r;
  };
  // The context alone is used...
  Result r = run("-u KERNCAP_SOCKET", "status");
  EXPECT_TRUE(absl::StrContains(r.out, "far.sock")) << r.out;
  // ...but $KERNCAP_SOCKET, like --socket, names the daemon on purpose and wins.
  r = run(absl::StrCat("KERNCAP_SOCKET=", dir, "/near.sock"), "status");
  EXPECT_TRUE(absl::StrContains(r.out, "near.sock")) << r.out;
  EXPECT_FALSE(absl::StrContains(r.out, "far.sock")) << r.out;
  r = run("-u KERNCAP_SOCKET", absl::StrCat("--socket=", dir, "/flag.sock status"));
  EXPECT_TRUE(absl::StrContains(r.out, "flag.sock")) << r.out;
  // --context on the command line beats $KERNCAP_SOCKET.
  r = run(absl::StrCat("KERNCAP_SOCKET=", dir, "/near.sock"), "--context=far status");
  EXPECT_TRUE(absl::StrContains(r.out, "far.sock")) << r.out;
  std::filesystem::remove_all(dir);
}

TEST(CliTest, VersionWithoutADaemonStillAnswers) {
  Result r = Ctl("version -o json", "2>/dev/null");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["client"]["api_version"], "kerncap.v1");
  EXPECT_TRUE(j["daemon"].is_null());
  EXPECT_TRUE(absl::StrContains(j["daemon_error"].get<std::string>(), "no kerncapd socket"));
}

TEST(CliTest, HelpTopicsPrintTheTables) {
  Result r = Ctl("help exit-codes");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_TRUE(absl::StrContains(r.out, "8   mismatch")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "77  no_device")) << r.out;
  r = Ctl("help json");
  EXPECT_TRUE(absl::StrContains(r.out, "RegionKind: device, device_vmm, managed, host_pinned"))
      << r.out;
  auto v = nlohmann::json::parse(Ctl("help json -o json", "2>/dev/null").out);
  EXPECT_EQ(v["enums"]["kerncap.v1.NameMatch"]["NAME_GLOB"], "glob");
  EXPECT_EQ(v["exit_codes"][0]["name"], "ok");
  for (const char* t : {"selectors", "output", "contexts"}) {
    EXPECT_EQ(Ctl(absl::StrCat("help ", t)).exit_code, 0) << t;
  }
}

TEST(CliTest, CompletionScriptsCoverTheCommands) {
  const std::string dir = ::testing::TempDir() + "/kc_completion";
  std::filesystem::create_directories(dir);
  Result bash = Ctl("completion bash", "2>/dev/null");
  ASSERT_EQ(bash.exit_code, 0);
  for (const char* w : {"captures", "set-context", "--kernel", "--since", "complete -o default -F _kerncapctl kerncapctl"}) {
    EXPECT_TRUE(absl::StrContains(bash.out, w)) << w;
  }
  // The bash script parses, and completes "capt" to "captures".
  Result run = Ctl(absl::StrCat("completion bash > ", dir, "/k.bash && bash -c 'source ", dir,
                                "/k.bash && COMP_WORDS=(kerncapctl capt) COMP_CWORD=1 "
                                "_kerncapctl && echo \"${COMPREPLY[*]}\"'"));
  EXPECT_EQ(run.exit_code, 0) << run.out;
  EXPECT_TRUE(absl::StrContains(run.out, "captures")) << run.out;
  Result zsh = Ctl("completion zsh", "2>/dev/null");
  EXPECT_TRUE(absl::StartsWith(zsh.out, "#compdef kerncapctl")) << zsh.out;
  Result fish = Ctl("completion fish", "2>/dev/null");
  EXPECT_TRUE(absl::StrContains(fish.out, "complete -c kerncapctl -n '__fish_use_subcommand' -a captures"))
      << fish.out;
  EXPECT_EQ(Ctl("completion tcsh").exit_code, 2);
  std::filesystem::remove_all(dir);
}

// Runs `shell driver` where the driver sources the generated completion
// script and asks it what it would complete; have_shell false when the
// shell is not installed.
struct Completion {
  bool have_shell = false;
  Result result;
};
Completion CompleteWith(const std::string& shell, const std::string& driver) {
  Completion c;
  // Only the shell's absence skips: a kerncapctl that fails to write the
  // script fails the test through the exit code.
  c.have_shell =
      std::system(absl::StrCat("command -v ", shell, " >/dev/null 2>&1").c_str()) == 0;
  if (!c.have_shell) return c;
  const std::string dir = absl::StrCat(::testing::TempDir(), "/kc_completion_", shell);
  std::filesystem::create_directories(dir);
  {
    std::ofstream d(dir + "/drive");
    d << driver;
  }
  c.result = Ctl(absl::StrCat("completion ", shell, " > ", dir, "/script && cd ", dir, " && ",
                              shell, " ", shell == "zsh" ? "-f " : "--no-config ", "drive"));
  std::filesystem::remove_all(dir);
  return c;
}

// The zsh script is loaded by zsh (not only generated) and its function
// offers the commands, a command's options and the completion shells. zsh's
// completion builtins only work inside a completion widget, so they are
// stood in for by functions that print what they were given.
TEST(CliTest, ZshCompletionRunsInZsh) {
  const std::string stubs =
      "compdef() { :; }\n"
      "_describe() { print -l -- ${(P)4}; }\n"
      "compadd() { [[ $1 == -a ]] && shift; local a; for a in \"$@\"; do print -l -- ${(P)a}; done; }\n"
      "source ./script || exit 9\n";
  Completion top = CompleteWith(
      "zsh", stubs + "words=(kerncapctl capt); CURRENT=2; _kerncapctl\n");
  if (!top.have_shell) GTEST_SKIP() << "zsh is not installed (deploy/install_deps.sh installs it)";
  ASSERT_EQ(top.result.exit_code, 0) << top.result.out;
  EXPECT_TRUE(absl::StrContains(top.result.out, "captures:")) << top.result.out;
  EXPECT_TRUE(absl::StrContains(top.result.out, "arm:")) << top.result.out;
  Completion arm = CompleteWith(
      "zsh", stubs + "words=(kerncapctl --json arm --ke); CURRENT=4; _kerncapctl\n");
  ASSERT_EQ(arm.result.exit_code, 0) << arm.result.out;
  EXPECT_TRUE(absl::StrContains(arm.result.out, "\n--kernel\n")) << arm.result.out;
  EXPECT_FALSE(absl::StrContains(arm.result.out, "captures:")) << arm.result.out;
  Completion shells = CompleteWith(
      "zsh", stubs + "words=(kerncapctl completion ''); CURRENT=3; _kerncapctl\n");
  for (const char* w : {"\nbash\n", "\nzsh\n", "\nfish\n"}) {
    EXPECT_TRUE(absl::StrContains(shells.result.out, w)) << shells.result.out;
  }
}

// The fish script is loaded by fish and completes through fish's own
// `complete -C` (what fish does on TAB).
TEST(CliTest, FishCompletionRunsInFish) {
  Completion c = CompleteWith("fish",
                              "source ./script; or exit 9\n"
                              "echo '== top'; complete -C 'kerncapctl capt'\n"
                              "echo '== arm'; complete -C 'kerncapctl arm --ker'\n"
                              "echo '== shells'; complete -C 'kerncapctl completion '\n");
  if (!c.have_shell) GTEST_SKIP() << "fish is not installed (deploy/install_deps.sh installs it)";
  ASSERT_EQ(c.result.exit_code, 0) << c.result.out;
  const std::string& out = c.result.out;
  const size_t arm = out.find("== arm"), shells = out.find("== shells");
  ASSERT_NE(arm, std::string::npos) << out;
  ASSERT_NE(shells, std::string::npos) << out;
  EXPECT_TRUE(absl::StrContains(out.substr(0, arm), "captures\t")) << out;
  EXPECT_TRUE(absl::StrContains(out.substr(arm, shells - arm), "--kernel")) << out;
  for (const char* w : {"bash", "zsh", "fish"}) {
    EXPECT_TRUE(absl::StrContains(out.substr(shells), w)) << out;
  }
}

}  // namespace
}  // namespace kerncap::ctl
