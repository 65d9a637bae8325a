#include "client/kerncapctl/profile_command.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace kerncap::ctl {

void AddProfileCommand(CLI::App* app, ReplayRequest* request, const bool* json) {
  CLI::App* sub = app->add_subcommand(
      "profile",
      "run Nsight Compute (ncu) on the replayed kernel: duration, occupancy, DRAM/L2 "
      "throughput, speed-of-light, roofline (CUDA; skipped, exit 77, without ncu or counter "
      "access)");
  sub->add_option("CAPTURE", request->capture, "capture id or unique prefix, or a .kcap file")
      ->required();
  sub->allow_extras();  // any other kerncap-replay flag is passed on
  // Flags declared for --help; each is passed on as NAME=VALUE (or NAME).
  struct Value {
    const char* name;
    const char* help;
  };
  static constexpr Value kValues[] = {
      {"--code-object", "profile this rebuilt code object instead of the captured one"},
      {"--ncu", "the ncu binary (default: $KERNCAP_NCU, PATH, the toolkit's places)"},
      {"--ncu-timeout", "seconds before ncu is killed"},
      {"--device", "GPU ordinal (default: the captured one)"},
      {"--grid", "launch override: blocks X[,Y[,Z]]"},
      {"--block", "launch override: threads per block X[,Y[,Z]]"},
      {"--shared-mem", "launch override: dynamic shared memory bytes"},
      {"--max-dynamic-shared-mem", "launch override: the max dynamic shared memory attribute"},
      {"--cache-preference", "launch override: none, shared, l1 or equal"},
      {"--cluster", "launch override: cluster dims X[,Y[,Z]]"},
  };
  auto values = std::make_shared<std::vector<std::pair<std::string, std::string>>>();
  values->reserve(std::size(kValues));
  std::vector<CLI::Option*> options;
  for (const Value& v : kValues) {
    values->emplace_back(v.name, "");
    options.push_back(sub->add_option(v.name, values->back().second, v.help));
  }
  auto json_flag = std::make_shared<bool>(false);
  sub->add_flag("--json", *json_flag, "one JSON document on stdout (kerncap-replay's)");
  sub->callback([sub, request, json, values, options, json_flag] {
    request->mode = "profile";
    request->flags.clear();
    for (size_t i = 0; i < options.size(); ++i) {
      if (options[i]->count() == 0) continue;
      request->flags.push_back((*values)[i].first + "=" + (*values)[i].second);
    }
    if (*json_flag || (json != nullptr && *json)) request->flags.push_back("--json");
    for (const std::string& extra : sub->remaining()) request->flags.push_back(extra);
  });
}

}  // namespace kerncap::ctl
