#include "common/control/default_paths.h"

#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>

#include "absl/strings/str_cat.h"

namespace kerncap::service {
namespace {

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? std::string() : std::string(v);
}

// XDG says relative values must be ignored.
bool UsableXdg(const std::string& dir) { return !dir.empty() && dir[0] == '/'; }

bool StatExists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

}  // namespace

PathEnv PathEnv::FromProcess() {
  PathEnv env;
  env.euid = ::geteuid();
  env.xdg_runtime_dir = Env("XDG_RUNTIME_DIR");
  env.xdg_data_home = Env("XDG_DATA_HOME");
  env.home = Env("HOME");
  if (env.home.empty()) {
    if (const passwd* pw = ::getpwuid(env.euid); pw != nullptr && pw->pw_dir != nullptr) {
      env.home = pw->pw_dir;
    }
  }
  env.kerncap_socket = Env("KERNCAP_SOCKET");
  env.xdg_config_home = Env("XDG_CONFIG_HOME");
  env.kerncap_config = Env("KERNCAP_CONFIG");
  env.exists = &StatExists;
  return env;
}

std::string DefaultRuntimeDir(const PathEnv& env) {
  if (env.euid == 0) return "/run/kerncap";
  if (UsableXdg(env.xdg_runtime_dir)) return absl::StrCat(env.xdg_runtime_dir, "/kerncap");
  return absl::StrCat("/tmp/kerncap-", env.euid);
}

std::string DefaultSocketPath(const PathEnv& env) {
  return absl::StrCat(DefaultRuntimeDir(env), "/kerncapd.sock");
}

std::string DefaultStoreDir(const PathEnv& env) {
  if (env.euid == 0) return "/var/lib/kerncap/store";
  if (UsableXdg(env.xdg_data_home)) return absl::StrCat(env.xdg_data_home, "/kerncap/store");
  std::string home = env.home.empty() ? std::string("/tmp") : env.home;
  return absl::StrCat(home, "/.local/share/kerncap/store");
}

std::string DefaultClientSocketPath(const PathEnv& env) {
  if (!env.kerncap_socket.empty()) return env.kerncap_socket;
  const std::string own = DefaultSocketPath(env);
  if (env.euid == 0 || env.exists == nullptr || env.exists(own)) return own;
  // No per-user kerncapd: the node's system daemon, when one runs. stat()
  // of the socket needs only search permission on /run/kerncap (0755), so a
  // user outside the group still finds it and gets SocketAccessHint.
  if (env.exists(kSystemSocketPath)) return kSystemSocketPath;
  return own;
}

std::string SocketAccessHint(const std::string& socket) {
  if (socket != kSystemSocketPath) return "";
  return "the node's system kerncapd lets members of the group kerncap in: ask an "
         "administrator to run `usermod -aG kerncap $USER`, then log in again; or start a "
         "kerncapd of your own (`kerncapd &`), which kerncapctl then uses";
}

std::string DefaultClientConfigPath(const PathEnv& env) {
  if (!env.kerncap_config.empty()) return env.kerncap_config;
  // XDG base directories: a relative $XDG_CONFIG_HOME is invalid and ignored.
  if (!env.xdg_config_home.empty() && env.xdg_config_home[0] == '/') {
    return env.xdg_config_home + "/kerncap/config.toml";
  }
  return env.home + "/.config/kerncap/config.toml";
}

}  // namespace kerncap::service
