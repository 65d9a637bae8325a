// Command group: help TOPIC and completion SHELL. The topics print from the
// tables they describe (exit codes from common/exit_codes.h, enum names from
// common/control/api_names.h), so they cannot go stale.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "client/kerncapctl/cli.h"
#include "common/control/api_names.h"
#include "common/exit_codes.h"

namespace kerncap::ctl {
namespace {

constexpr char kSelectors[] = R"(Selectors: which dispatches an arm captures (kerncapctl arm)

  --kernel=NAME      the kernel name, matched per --match against the demangled name:
  --match=substring  NAME occurs anywhere in it (default)
  --match=glob       fnmatch(3) glob over the whole name: 'gemm_*', '*softmax<float>*'
  --match=regex      RE2-style regular expression (no backreferences), searched in the name
  --match=mangled    NAME is the exact mangled name (_Z6matmulPfS_S_i)
  --kernel=KIND:PAT  the kind in the pattern, as ncu's regex: ("regex:^gemm_.*f16$",
                     "glob:gemm_*", "mangled:_Z6matmulPfS_S_i", "substring:gemm")
  --pid=PID          only this process;  --process=TEXT  process names containing TEXT
  --device=N         only dispatches on device ordinal N
  --rank=N           only the process of rank N in a parallel job (Open MPI, MVAPICH, PMIx,
                     MPICH PMI, torchrun, Slurm variables); a process whose rank is unknown
                     never matches. `kerncapctl agents -o wide` and `show` print the rank
  --skip=N           let N matching dispatches of each process pass, then capture
  --nth=N            capture only the Nth matching dispatch of each process (not with --skip)
  --count=N          captures to take before the arm is done (default 1)
  --ttl=DURATION     the arm expires after 30s, 5m, 2h, 1d
  --per-shape[=scalars|launch]
                     one capture per distinct launch shape, at most --count (default 16):
                     scalars (the default) = grid, block, shared memory, cluster and the
                     argument bytes with pointer words masked; launch = launch configuration
                     only. Not with --nth

A dispatch goes to the oldest active arm that selects it; younger arms do not count it.
`kerncapctl kernels [--kernel=PAT]` lists the kernels the live agents have loaded, filtered
exactly as an arm would; `arm` prints what it matches among them and warns when a pattern
takes several distinct kernels.
Dispatches an arm selected but could not capture faithfully are listed by `kerncapctl arms`.
)";

constexpr char kOutput[] = R"(Output formats (global options, valid before or after the command)

  -o table    aligned columns for people (default)
  -o wide     tables with more columns (captures: whole kernel names, platform, host, rank)
  -o json     one JSON document per command on stdout (watch: one per event); see help json
  -o yaml     the same document as YAML
  -o name     KIND/ID per line (capture/cap-7f3a), for scripts
  -q          bare ids, one per line:  kerncapctl captures --kernel=old -q | xargs kerncapctl rm
  --no-headers  tables without the header row
  --json      the same as -o json
Every command takes them. -q / -o name print what a command names: show the whole id of a
prefix, disarm the arms it ended, verify the captures with problems, diff the two ids when they
differ, watch each event's id; status, gc and version name nothing and print nothing (status -q
is a liveness check); replay, validate and bench drop kerncap-replay's report. The exit code
always says how it went.

Field selectors, a small subset of kubectl's, over the document -o json prints:
  -o jsonpath=TEMPLATE    text with {FIELD} parts: FIELD is .a.b dotted names, [N] an index,
                          [*] every element (printed space-separated):
                            kerncapctl captures -o jsonpath='{.captures[*].capture_id}'
                            kerncapctl show cap-7f3a -o jsonpath='{.kernel.name} {.launch.grid}'
  -o custom-columns=SPEC  a table of a list command's items, SPEC = HEADER:FIELD,...
                          (FIELD as above, relative to one item; a leading . is optional):
                            kerncapctl captures -o custom-columns=ID:capture_id,KERNEL:kernel
  --sort-by=FIELD         order a list command's items (captures, agents, arms,
                          substitutions) by one of their JSON fields, ascending; numbers as
                          numbers: kerncapctl captures --sort-by=logical_bytes
A FIELD that an item lacks prints as "<none>" (kubectl's convention); a malformed TEMPLATE or
SPEC is a usage error (exit 2).
)";

constexpr char kContexts[] = R"(Contexts: named ways to reach a kerncapd

A context holds an endpoint (host or socket) and its TLS and token files, so that remote
nodes do not need --host --tls-ca --token-file on every call. They live in
$KERNCAP_CONFIG, else $XDG_CONFIG_HOME/kerncap/config.toml, else ~/.config/kerncap/config.toml:

  current-context = "node17"

  [contexts.node17]
  host = "node17:7443"
  tls-ca = "/home/ann/kerncap/ca.pem"
  token-file = "/home/ann/kerncap/node17.token"

Keys: host or socket, tls-ca, tls-cert, tls-key, token-file, insecure (true/false). The file
is a strict subset of TOML; anything else is an error naming the line.

  kerncapctl config set-context node17 --host=node17:7443 --tls-ca=ca.pem --use
  kerncapctl config get-contexts
  kerncapctl config use-context node17
  kerncapctl --context=node18 status     # one call with another context

Which daemon a command reaches: --socket, --host or $KERNCAP_SOCKET when given (they beat
the current context, so a command meant for this node never goes to the context's); else
--context or the current context; else your own kerncapd's socket when it runs; else the
node's system daemon (/run/kerncap/kerncapd.sock; its socket is for the group kerncap).
TLS and token options given on the command line win over the context's.
)";

std::string ExitCodesText() {
  std::string out = "Exit codes (the same for kerncapctl, kerncapd, kerncap-replay and reproducer "
                    "projects)\n\n";
  for (const exit_code::ExitCodeInfo& e : exit_code::AllExitCodes()) {
    absl::StrAppend(&out, "  ", e.code, e.code < 10 ? "   " : "  ", e.name,
                    std::string(13 - std::string(e.name).size(), ' '), e.meaning, "\n");
  }
  absl::StrAppend(&out,
                  "\nWith -o json an error is one object on stderr:\n"
                  "  {\"error\":{\"code\":\"not_found\",\"message\":\"...\",\"exit_code\":3,"
                  "\"status\":\"not_found\"}}\n"
                  "code is the exit code's name above; status the gRPC status it came from.\n");
  return out;
}

nlohmann::json Vocabulary() {
  nlohmann::json enums = nlohmann::json::object();
  for (const google::protobuf::EnumDescriptor* e : api::AllApiEnums()) {
    nlohmann::json values = nlohmann::json::object();
    for (int i = 0; i < e->value_count(); ++i) {
      values[e->value(i)->name()] = std::string(api::EnumName(e, e->value(i)->number()));
    }
    enums[e->full_name()] = values;
  }
  nlohmann::json codes = nlohmann::json::array();
  for (const exit_code::ExitCodeInfo& e : exit_code::AllExitCodes()) {
    codes.push_back({{"code", e.code}, {"name", e.name}, {"meaning", e.meaning}});
  }
  return {{"api_version", api::kApiVersion},
          {"enums", enums},
          {"address_fields", api::AddressFieldNames()},
          {"exit_codes", codes}};
}

std::string JsonText() {
  std::string out = R"(JSON output (-o json; docs/JSON.md has the full policy)

Every command and binary (kerncapctl, kerncap-replay --json, kerncapd's log lines, the Python
client's to_dict) writes values the same way:
  field names   snake_case, the API's field names; every scalar field present
  integers      JSON numbers, 64-bit ones included (never strings)
  addresses     "0x..." strings, lowercase (the fields listed below)
  digests/bytes lowercase hex strings
  times         *_unix_ms fields: integer milliseconds since the Unix epoch
  enums         short lowercase names (below)
  errors        one object on stderr: {"error":{"code","message","exit_code","status"}},
                code = the exit code's name (help exit-codes)

Enum names (kerncapctl help json -o json gives this table as JSON):
)";
  for (const google::protobuf::EnumDescriptor* e : api::AllApiEnums()) {
    absl::StrAppend(&out, "  ", e->full_name().substr(std::string("kerncap.v1.").size()), ": ",
                    absl::StrJoin(api::EnumNames(e), ", "), "\n");
  }
  absl::StrAppend(&out, "\nAddress fields:\n  ", absl::StrJoin(api::AddressFieldNames(), "\n  "),
                  "\n");
  return out;
}

struct CommandInfo {
  std::string path;  // "arm", "config set-context"
  std::string description;
  std::vector<std::string> long_options;  // "--kernel"
};

void Collect(const CLI::App* app, const std::string& prefix, std::vector<CommandInfo>* out) {
  for (const CLI::App* sub : app->get_subcommands([](const CLI::App*) { return true; })) {
    CommandInfo c;
    c.path = prefix.empty() ? sub->get_name() : prefix + " " + sub->get_name();
    c.description = sub->get_description();
    for (const CLI::Option* o : sub->get_options()) {
      for (const std::string& l : o->get_lnames()) c.long_options.push_back("--" + l);
    }
    out->push_back(c);
    Collect(sub, c.path, out);
  }
}

std::vector<std::string> GlobalLongOptions(const CLI::App& app) {
  std::vector<std::string> out;
  for (const CLI::Option* o : app.get_options()) {
    for (const std::string& l : o->get_lnames()) out.push_back("--" + l);
  }
  return out;
}

// Commands whose positional argument is a capture id (completed from
// `kerncapctl captures -q`).
bool TakesCapture(const std::string& path) {
  for (const char* c : {"show", "rm", "export", "repro", "replay", "validate", "bench", "verify",
                        "pull"}) {
    if (path == c) return true;
  }
  return false;
}

std::string Bash(const std::vector<CommandInfo>& cmds, const std::vector<std::string>& globals) {
  std::vector<std::string> top;
  for (const CommandInfo& c : cmds) {
    if (c.path.find(' ') == std::string::npos) top.push_back(c.path);
  }
  std::string out = absl::StrCat(
      "# bash completion for kerncapctl: source <(kerncapctl completion bash)\n"
      "_kerncapctl() {\n"
      "  local cur=\"${COMP_WORDS[COMP_CWORD]}\" cmd=\"\" sub=\"\" i w\n"
      "  for ((i = 1; i < COMP_CWORD; i++)); do\n"
      "    w=\"${COMP_WORDS[i]}\"\n"
      "    [[ $w == -* ]] && continue\n"
      "    if [[ -z $cmd ]]; then cmd=$w; elif [[ $cmd == config && -z $sub ]]; then sub=$w; fi\n"
      "  done\n"
      "  local globals=\"",
      absl::StrJoin(globals, " "),
      "\"\n"
      "  if [[ -z $cmd ]]; then\n"
      "    COMPREPLY=($(compgen -W \"",
      absl::StrJoin(top, " "),
      " $globals\" -- \"$cur\"))\n"
      "    return\n"
      "  fi\n"
      "  local key=\"$cmd\"; [[ -n $sub ]] && key=\"$cmd $sub\"\n"
      "  local opts=\"\"\n"
      "  case \"$key\" in\n");
  for (const CommandInfo& c : cmds) {
    std::vector<std::string> words = c.long_options;
    if (c.path == "config") {
      for (const CommandInfo& s : cmds) {
        if (s.path.rfind("config ", 0) == 0) words.push_back(s.path.substr(7));
      }
    }
    if (c.path == "completion") words.insert(words.end(), {"bash", "zsh", "fish"});
    if (c.path == "help") {
      words.insert(words.end(), {"selectors", "exit-codes", "json", "output", "contexts"});
      words.insert(words.end(), top.begin(), top.end());
    }
    absl::StrAppend(&out, "    \"", c.path, "\") opts=\"", absl::StrJoin(words, " "), "\" ;;\n");
  }
  absl::StrAppend(&out,
                  "  esac\n"
                  "  if [[ $cur != -* ]]; then\n"
                  "    case \"$key\" in\n"
                  "      show|rm|export|repro|replay|validate|bench|verify|pull)\n"
                  "        opts=\"$opts $(kerncapctl captures -q 2>/dev/null)\" ;;\n"
                  "      \"config use-context\"|\"config delete-context\"|\"config set-context\")\n"
                  "        opts=\"$opts $(kerncapctl config get-contexts -q 2>/dev/null)\" ;;\n"
                  "    esac\n"
                  "  fi\n"
                  "  COMPREPLY=($(compgen -W \"$opts $globals\" -- \"$cur\"))\n"
                  "}\n"
                  "complete -o default -F _kerncapctl kerncapctl\n");
  return out;
}

std::string ZshQuote(const std::string& s) {
  return absl::StrReplaceAll(s, {{"'", "'\\''"}, {":", "\\:"}, {"[", "\\["}, {"]", "\\]"}});
}

std::string Zsh(const std::vector<CommandInfo>& cmds, const std::vector<std::string>& globals) {
  std::string out =
      "#compdef kerncapctl\n"
      "# zsh completion for kerncapctl: kerncapctl completion zsh > \"${fpath[1]}/_kerncapctl\"\n"
      "_kerncapctl() {\n"
      "  local -a commands\n"
      "  commands=(\n";
  for (const CommandInfo& c : cmds) {
    if (c.path.find(' ') != std::string::npos) continue;
    absl::StrAppend(&out, "    '", ZshQuote(c.path), ":", ZshQuote(c.description), "'\n");
  }
  absl::StrAppend(&out,
                  "  )\n"
                  "  local -a globals\n"
                  "  globals=(",
                  absl::StrJoin(globals, " "),
                  ")\n"
                  "  local cmd=\"\" i\n"
                  "  for ((i = 2; i < CURRENT; i++)); do\n"
                  "    [[ ${words[i]} == -* ]] && continue\n"
                  "    cmd=${words[i]}; break\n"
                  "  done\n"
                  "  if [[ -z $cmd ]]; then\n"
                  "    _describe -t commands 'kerncapctl command' commands\n"
                  "    compadd -a globals\n"
                  "    return\n"
                  "  fi\n"
                  "  local -a opts\n"
                  "  case $cmd in\n");
  for (const CommandInfo& c : cmds) {
    if (c.path.find(' ') != std::string::npos) continue;
    std::vector<std::string> words = c.long_options;
    if (c.path == "config") {
      for (const CommandInfo& s : cmds) {
        if (s.path.rfind("config ", 0) == 0) words.push_back(s.path.substr(7));
      }
    }
    if (c.path == "completion") words.insert(words.end(), {"bash", "zsh", "fish"});
    if (c.path == "help") {
      words.insert(words.end(), {"selectors", "exit-codes", "json", "output", "contexts"});
    }
    absl::StrAppend(&out, "    ", c.path, ") opts=(", absl::StrJoin(words, " "), ") ;;\n");
  }
  absl::StrAppend(&out,
                  "  esac\n"
                  "  case $cmd in\n"
                  "    show|rm|export|repro|replay|validate|bench|verify|pull)\n"
                  "      opts+=(${(f)\"$(kerncapctl captures -q 2>/dev/null)\"}) ;;\n"
                  "  esac\n"
                  "  compadd -a opts globals\n"
                  "}\n"
                  "compdef _kerncapctl kerncapctl\n");
  return out;
}

std::string FishQuote(const std::string& s) {
  return "'" + absl::StrReplaceAll(s, {{"\\", "\\\\"}, {"'", "\\'"}}) + "'";
}

std::string Fish(const std::vector<CommandInfo>& cmds, const CLI::App& app) {
  std::vector<std::string> top;
  for (const CommandInfo& c : cmds) {
    if (c.path.find(' ') == std::string::npos) top.push_back(c.path);
  }
  std::string out =
      "# fish completion for kerncapctl: kerncapctl completion fish > "
      "~/.config/fish/completions/kerncapctl.fish\n"
      "complete -c kerncapctl -f\n";
  for (const CLI::Option* o : app.get_options()) {
    for (const std::string& l : o->get_lnames()) {
      absl::StrAppend(&out, "complete -c kerncapctl -l ", l, " -d ",
                      FishQuote(o->get_description()), "\n");
    }
  }
  for (const CommandInfo& c : cmds) {
    const size_t space = c.path.find(' ');
    if (space == std::string::npos) {
      absl::StrAppend(&out, "complete -c kerncapctl -n '__fish_use_subcommand' -a ", c.path,
                      " -d ", FishQuote(c.description), "\n");
    } else {
      absl::StrAppend(&out, "complete -c kerncapctl -n '__fish_seen_subcommand_from ",
                      c.path.substr(0, space), "' -a ", c.path.substr(space + 1), " -d ",
                      FishQuote(c.description), "\n");
    }
    const std::string last = space == std::string::npos ? c.path : c.path.substr(space + 1);
    for (const std::string& l : c.long_options) {
      absl::StrAppend(&out, "complete -c kerncapctl -n '__fish_seen_subcommand_from ", last,
                      "' -l ", l.substr(2), "\n");
    }
    if (TakesCapture(c.path)) {
      absl::StrAppend(&out, "complete -c kerncapctl -n '__fish_seen_subcommand_from ", c.path,
                      "' -a '(kerncapctl captures -q 2>/dev/null)'\n");
    }
  }
  absl::StrAppend(&out, "complete -c kerncapctl -n '__fish_seen_subcommand_from completion' -a 'bash zsh fish'\n",
                  "complete -c kerncapctl -n '__fish_seen_subcommand_from help' -a 'selectors exit-codes json output contexts ",
                  absl::StrJoin(top, " "), "'\n");
  return out;
}

}  // namespace

void AddHelpCommands(Cli& cli) {
  auto topic = std::make_shared<std::string>();
  CLI::App* help = cli.app.add_subcommand(
      "help", "help on a command or a topic: selectors, exit-codes, json, output, contexts");
  help->add_option("TOPIC", *topic, "a command name or a topic");
  SetCommandHelp(help, Uses::kNone,
                 {"kerncapctl help arm", "kerncapctl help exit-codes", "kerncapctl help json -o json"});
  help->callback([&cli, topic] {
    cli.resolve_connection = false;
    cli.local = [&cli, topic](Output o) -> absl::StatusOr<int> {
      const std::string& t = *topic;
      if (t.empty()) {
        o.out << cli.app.help();
        return exit_code::kOk;
      }
      if (t == "exit-codes" || t == "exit_codes") {
        if (o.structured()) {
          Emit(o, Vocabulary()["exit_codes"]);
        } else {
          o.out << ExitCodesText();
        }
        return exit_code::kOk;
      }
      if (t == "json") {
        if (o.structured()) {
          Emit(o, Vocabulary());
        } else {
          o.out << JsonText();
        }
        return exit_code::kOk;
      }
      if (t == "selectors") {
        o.out << kSelectors;
        return exit_code::kOk;
      }
      if (t == "output") {
        o.out << kOutput;
        return exit_code::kOk;
      }
      if (t == "contexts") {
        o.out << kContexts;
        return exit_code::kOk;
      }
      std::vector<std::string> names;
      for (const CLI::App* sub : cli.app.get_subcommands([](const CLI::App*) { return true; })) {
        if (sub->get_name() == t) {
          o.out << sub->help("kerncapctl");
          return exit_code::kOk;
        }
        names.push_back(sub->get_name());
      }
      for (const char* n : {"selectors", "exit-codes", "json", "output", "contexts"}) {
        names.push_back(n);
      }
      std::string near = NearestCommand(t, names);
      return absl::InvalidArgumentError(absl::StrCat(
          "no help topic or command \"", t, "\"",
          near.empty() ? std::string() : absl::StrCat("; did you mean \"", near, "\"?"),
          " (topics: selectors, exit-codes, json, output, contexts)"));
    };
  });

  auto shell = std::make_shared<std::string>();
  CLI::App* completion =
      cli.app.add_subcommand("completion", "print a shell completion script: bash, zsh or fish");
  completion->add_option("SHELL", *shell, "bash | zsh | fish")
      ->required()
      ->check(CLI::IsMember({"bash", "zsh", "fish"}));
  SetCommandHelp(completion, Uses::kNone,
                 {"source <(kerncapctl completion bash)",
                  "kerncapctl completion zsh > \"${fpath[1]}/_kerncapctl\"",
                  "kerncapctl completion fish > ~/.config/fish/completions/kerncapctl.fish"},
                 "Capture ids complete from `kerncapctl captures -q` (the current context).");
  completion->callback([&cli, shell] {
    cli.resolve_connection = false;
    cli.local = [&cli, shell](Output o) -> absl::StatusOr<int> {
      std::vector<CommandInfo> cmds;
      Collect(&cli.app, "", &cmds);
      std::vector<std::string> globals = GlobalLongOptions(cli.app);
      if (*shell == "bash") o.out << Bash(cmds, globals);
      if (*shell == "zsh") o.out << Zsh(cmds, globals);
      if (*shell == "fish") o.out << Fish(cmds, cli.app);
      return exit_code::kOk;
    };
  });
}

}  // namespace kerncap::ctl
