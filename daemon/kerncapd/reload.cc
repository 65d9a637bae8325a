#include "daemon/kerncapd/reload.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace kerncap::kerncapd {
namespace {

ReloadPlan Refuse(std::string reason) {
  ReloadPlan p;
  p.refused = true;
  p.reason = std::move(reason);
  return p;
}

std::vector<std::string> RestartNeeded(const DaemonConfig& a, const DaemonConfig& b) {
  std::vector<std::string> out;
  auto differs = [&](bool d, const char* name) {
    if (d) out.push_back(name);
  };
  differs(a.store_dir != b.store_dir, "store");
  differs(a.socket != b.socket, "socket");
  differs(a.agent_socket != b.agent_socket, "agent-socket");
  differs(a.listen != b.listen, "listen");
  differs(a.tls_cert != b.tls_cert, "tls-cert");
  differs(a.tls_key != b.tls_key, "tls-key");
  differs(a.tls_client_ca != b.tls_client_ca, "tls-client-ca");
  differs(a.require_client_cert != b.require_client_cert, "require-client-cert");
  differs(a.tcp_user != b.tcp_user, "tcp-user");
  differs(a.socket_group != b.socket_group, "socket-group");
  differs(a.insecure_tcp != b.insecure_tcp, "insecure-tcp");
  differs(a.allow_unauthenticated_tls != b.allow_unauthenticated_tls,
          "allow-unauthenticated-tls");
  differs(a.chunk_size != b.chunk_size, "chunk-size");
  differs(a.workers != b.workers, "workers");
  differs(a.ring_slot_mib != b.ring_slot_mib, "ring-slot-mib");
  differs(a.ring_slots != b.ring_slots, "ring-slots");
  differs(a.staging_total_gib != b.staging_total_gib, "staging-total-gib");
  differs(a.drain_timeout_s != b.drain_timeout_s, "drain-timeout");
  return out;
}

}  // namespace

ReloadPlan PlanReload(const DaemonConfig& running, const std::string& running_token,
                      const ParseOutcome& parsed, const std::string& parse_error,
                      const TokenReader& read_token) {
  if (!parsed.run) {
    absl::string_view why = absl::StripAsciiWhitespace(parse_error);
    absl::ConsumePrefix(&why, "kerncapd: ");
    return Refuse(absl::StrCat("the config does not parse: ",
                               why.empty() ? absl::string_view("no reason given") : why));
  }
  const DaemonConfig& next = parsed.config;
  ReloadPlan plan;
  plan.log_level = next.log_level;
  plan.log_level_name = next.log_level_name;
  plan.restart_needed = RestartNeeded(running, next);
  if (next.token_file.empty()) {
    if (!running_token.empty()) {
      return Refuse(
          "the config names no token file while a token is in force; a reload never turns "
          "the token off (restart kerncapd without --token-file to do that)");
    }
    plan.token_state = "none";
    return plan;
  }
  absl::StatusOr<std::string> token = read_token(next.token_file);
  if (!token.ok()) {
    return Refuse(absl::StrCat("token file: ", token.status().message()));
  }
  if (!running_token.empty() && token->size() < running_token.size() &&
      absl::StartsWith(running_token, *token)) {
    return Refuse(absl::StrCat("token file ", next.token_file,
                               " holds a truncated copy of the running token (a file caught "
                               "mid-write?); write the new token whole, then send SIGHUP again"));
  }
  plan.token_state = running_token.empty()         ? "added"
                     : *token == running_token ? "unchanged"
                                               : "replaced";
  plan.token = std::move(*token);
  return plan;
}

}  // namespace kerncap::kerncapd
