// process_name.h: this process's name as the agent reports it (the Hello,
// `kerncapctl agents`) and as `--process=NAME` selectors match it.
//
// /proc/self/comm is the kernel's task name, cut to 15 bytes (TASK_COMM_LEN),
// so a program called graph_decode_loop is "graph_decode_lo" there and
// `--process=graph_decode_loop` would match nothing. A comm of exactly 15
// bytes is completed from the executable's file name or argv[0]'s when one
// of them starts with it; a name the program set itself (prctl, setproctitle)
// or a short one is kept as is.
#ifndef KERNCAP_AGENT_LINK_PROCESS_NAME_H_
#define KERNCAP_AGENT_LINK_PROCESS_NAME_H_

#include <string>
#include <vector>

namespace kerncap::agent {

// `comm` completed from the first of `paths` (executable, argv[0]) whose file
// name starts with it, when comm has the kernel's full 15 bytes.
std::string CompleteProcessName(std::string comm, const std::vector<std::string>& paths);

// This process's name: /proc/self/comm completed from /proc/self/exe and
// argv[0] (/proc/self/cmdline).
std::string ProcessName();

}  // namespace kerncap::agent

#endif  // KERNCAP_AGENT_LINK_PROCESS_NAME_H_
