// Command group: contexts (config get-contexts | current-context |
// use-context | set-context | delete-context). The file and its format:
// context_config.h.
#include <filesystem>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "client/kerncapctl/args.h"
#include "client/kerncapctl/cli.h"
#include "client/kerncapctl/context_config.h"
#include "common/exit_codes.h"
#include "common/status_macros.h"

namespace kerncap::ctl {
namespace {

std::string Absolute(const std::string& path) {
  if (path.empty() || path[0] == '/') return path;
  return (std::filesystem::current_path() / path).lexically_normal().string();
}

absl::StatusOr<int> GetContexts(const GlobalOptions& g, Output o) {
  KC_ASSIGN_OR_RETURN(ContextConfig cfg, LoadContextConfig(g.config_path));
  if (o.structured()) {
    nlohmann::json list = nlohmann::json::array();
    for (const Context& c : cfg.contexts) {
      list.push_back({{"name", c.name},
                      {"current", c.name == cfg.current},
                      {"host", c.host},
                      {"socket", c.socket},
                      {"tls_ca", c.tls_ca},
                      {"tls_cert", c.tls_cert},
                      {"tls_key", c.tls_key},
                      {"token_file", c.token_file},
                      {"insecure", c.insecure}});
    }
    Emit(o, nlohmann::json{{"file", g.config_path},
                           {"current_context", cfg.current},
                           {"contexts", list}});
    return exit_code::kOk;
  }
  if (o.ids_only()) {
    std::vector<std::string> names;
    for (const Context& c : cfg.contexts) names.push_back(c.name);
    Ids(o, "context", names);
    return exit_code::kOk;
  }
  if (cfg.contexts.empty()) {
    o.out << "no contexts in " << g.config_path
          << " (add one: kerncapctl config set-context NAME --host=HOST:PORT ...)\n";
    return exit_code::kOk;
  }
  Table t({"CURRENT", "NAME", "ENDPOINT", "TLS CA", "CLIENT CERT", "TOKEN FILE"});
  for (const Context& c : cfg.contexts) {
    std::string endpoint = !c.host.empty() ? c.host + (c.insecure ? " (insecure)" : "")
                           : !c.socket.empty() ? "unix:" + c.socket
                                               : "-";
    t.AddRow({c.name == cfg.current ? "*" : "", c.name, endpoint, c.tls_ca.empty() ? "-" : c.tls_ca,
              c.tls_cert.empty() ? "-" : c.tls_cert, c.token_file.empty() ? "-" : c.token_file});
  }
  t.Print(o);
  return exit_code::kOk;
}

}  // namespace

void AddConfigCommands(Cli& cli) {
  CLI::App* config = cli.app.add_subcommand(
      "config", "named contexts for reaching daemons (host, TLS files, token file)");
  config->require_subcommand(1);
  config->callback([&cli] { cli.resolve_connection = false; });
  SetCommandHelp(config, Uses::kNone,
                 {"kerncapctl config set-context node17 --host=node17:7443 --tls-ca=ca.pem "
                  "--token-file=node17.token --use",
                  "kerncapctl config get-contexts", "kerncapctl --context=node17 captures"},
                 "The contexts file: $KERNCAP_CONFIG, else $XDG_CONFIG_HOME/kerncap/config.toml "
                 "(kerncapctl help contexts).");

  CLI::App* get = config->add_subcommand("get-contexts", "list the contexts (* marks the current one)");
  SetCommandHelp(get, Uses::kNone, {"kerncapctl config get-contexts", "kerncapctl config get-contexts -o json"});
  get->callback([&cli] { cli.local = [&cli](Output o) { return GetContexts(cli.g, o); }; });

  CLI::App* cur = config->add_subcommand("current-context", "print the current context's name");
  SetCommandHelp(cur, Uses::kNone, {"kerncapctl config current-context"});
  cur->callback([&cli] {
    cli.local = [&cli](Output o) -> absl::StatusOr<int> {
      KC_ASSIGN_OR_RETURN(ContextConfig cfg, LoadContextConfig(cli.g.config_path));
      if (cfg.current.empty()) {
        return absl::NotFoundError(absl::StrCat("no current context in ", cli.g.config_path,
                                                " (kerncapctl config use-context NAME)"));
      }
      if (o.structured()) {
        Emit(o, nlohmann::json{{"current_context", cfg.current}});
      } else {
        o.out << cfg.current << "\n";
      }
      return exit_code::kOk;
    };
  });

  auto use_name = std::make_shared<std::string>();
  CLI::App* use = config->add_subcommand("use-context", "make NAME the current context");
  use->add_option("NAME", *use_name, "context name")->required();
  SetCommandHelp(use, Uses::kNone, {"kerncapctl config use-context node17"});
  use->callback([&cli, use_name] {
    cli.local = [&cli, use_name](Output o) -> absl::StatusOr<int> {
      KC_ASSIGN_OR_RETURN(ContextConfig cfg, LoadContextConfig(cli.g.config_path));
      if (cfg.Find(*use_name) == nullptr) {
        return absl::NotFoundError(absl::StrCat("no context \"", *use_name, "\" in ",
                                                cli.g.config_path,
                                                " (kerncapctl config get-contexts lists them)"));
      }
      cfg.current = *use_name;
      KC_RETURN_IF_ERROR(SaveContextConfig(cli.g.config_path, cfg));
      if (!o.structured() && !o.ids_only()) o.out << "current context: " << *use_name << "\n";
      return exit_code::kOk;
    };
  });

  auto set = std::make_shared<Context>();
  auto set_use = std::make_shared<bool>(false);
  CLI::App* setc = config->add_subcommand(
      "set-context", "create or update context NAME (only the options given change)");
  setc->add_option("NAME", set->name, "context name (letters, digits, - and _)")->required();
  CLI::Option* host = setc->add_option("--host", set->host, "kerncapd's HOST:PORT (TLS)");
  CLI::Option* sock = setc->add_option("--socket", set->socket, "kerncapd's Unix socket");
  CLI::Option* ca = setc->add_option("--tls-ca", set->tls_ca, "PEM CA bundle to verify the daemon");
  CLI::Option* cert = setc->add_option("--tls-cert", set->tls_cert, "client certificate (mutual TLS)");
  CLI::Option* key = setc->add_option("--tls-key", set->tls_key, "client key (mutual TLS)");
  CLI::Option* tok = setc->add_option("--token-file", set->token_file, "file holding the bearer token");
  CLI::Option* insecure = setc->add_flag("--insecure", set->insecure,
                                         "plaintext TCP (daemons started with --insecure-tcp)");
  setc->add_flag("--use", *set_use, "also make it the current context");
  host->excludes(sock);
  SetCommandHelp(setc, Uses::kNone,
                 {"kerncapctl config set-context node17 --host=node17:7443 --tls-ca=ca.pem --use",
                  "kerncapctl config set-context node17 --token-file ~/kerncap/node17.token",
                  "kerncapctl config set-context local --socket=/run/kerncap/kerncapd.sock"},
                 "Relative file paths are stored as absolute paths.");
  setc->callback([&cli, set, set_use, host, sock, ca, cert, key, tok, insecure] {
    cli.local = [&cli, set, set_use, host, sock, ca, cert, key, tok,
                 insecure](Output o) -> absl::StatusOr<int> {
      KC_ASSIGN_OR_RETURN(ContextConfig cfg, LoadContextConfig(cli.g.config_path));
      if (set->name.empty() || set->name.find_first_of("\n\"") != std::string::npos) {
        return absl::InvalidArgumentError("set-context: NAME must be non-empty, without quotes");
      }
      if (host->count() > 0) KC_RETURN_IF_ERROR(ParseEndpoint(set->host).status());
      if (sock->count() > 0 && (set->socket.empty() || set->socket[0] != '/')) {
        set->socket = Absolute(set->socket);
      }
      Context* c = cfg.Find(set->name);
      const bool created = c == nullptr;
      if (created) {
        cfg.contexts.push_back(Context{});
        c = &cfg.contexts.back();
        c->name = set->name;
      }
      if (host->count() > 0) {
        c->host = set->host;
        c->socket.clear();
      }
      if (sock->count() > 0) {
        c->socket = set->socket;
        c->host.clear();
      }
      if (ca->count() > 0) c->tls_ca = Absolute(set->tls_ca);
      if (cert->count() > 0) c->tls_cert = Absolute(set->tls_cert);
      if (key->count() > 0) c->tls_key = Absolute(set->tls_key);
      if (tok->count() > 0) c->token_file = Absolute(set->token_file);
      if (insecure->count() > 0) c->insecure = set->insecure;
      if (*set_use) cfg.current = set->name;
      KC_RETURN_IF_ERROR(SaveContextConfig(cli.g.config_path, cfg));
      if (!o.structured() && !o.ids_only()) {
        o.out << (created ? "created" : "updated") << " context " << set->name << " in "
              << cli.g.config_path << (*set_use ? " (now current)" : "") << "\n";
      }
      return exit_code::kOk;
    };
  });

  auto del_name = std::make_shared<std::string>();
  CLI::App* del = config->add_subcommand("delete-context", "remove context NAME");
  del->add_option("NAME", *del_name, "context name")->required();
  SetCommandHelp(del, Uses::kNone, {"kerncapctl config delete-context node17"});
  del->callback([&cli, del_name] {
    cli.local = [&cli, del_name](Output o) -> absl::StatusOr<int> {
      KC_ASSIGN_OR_RETURN(ContextConfig cfg, LoadContextConfig(cli.g.config_path));
      auto it = std::find_if(cfg.contexts.begin(), cfg.contexts.end(),
                             [&](const Context& c) { return c.name == *del_name; });
      if (it == cfg.contexts.end()) {
        return absl::NotFoundError(absl::StrCat("no context \"", *del_name, "\" in ",
                                                cli.g.config_path));
      }
      cfg.contexts.erase(it);
      if (cfg.current == *del_name) cfg.current.clear();
      KC_RETURN_IF_ERROR(SaveContextConfig(cli.g.config_path, cfg));
      if (!o.structured() && !o.ids_only()) o.out << "deleted context " << *del_name << "\n";
      return exit_code::kOk;
    };
  });
}

}  // namespace kerncap::ctl
