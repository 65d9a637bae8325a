// process_name.h: a process's name as `kerncapctl agents` shows it and as
// `--process=NAME` selectors match it. The agent reports its own (the
// Hello); kerncapd reads it for the pid the agent socket's credentials name,
// never trusting the Hello's (daemon/agent_link/agent_connection.cc).
//
// /proc/self/comm is the kernel's task name, cut to 15 bytes (TASK_COMM_LEN),
// so a program called graph_decode_loop is "graph_decode_lo" there and
// `--process=graph_decode_loop` would match nothing. A comm of exactly 15
// bytes is completed from the executable's file name or argv[0]'s when one
// of them starts with it; a name the program set itself (prctl, setproctitle)
// or a short one is kept as is.
#ifndef KERNCAP_COMMON_AGENT_LINK_PROCESS_NAME_H_
#define KERNCAP_COMMON_AGENT_LINK_PROCESS_NAME_H_

#include <string>
#include <vector>

namespace kerncap::link {

// `comm` completed from the first of `paths` (executable, argv[0]) whose file
// name starts with it, when comm has the kernel's full 15 bytes.
std::string CompleteProcessName(std::string comm, const std::vector<std::string>& paths);

// This process's name: /proc/self/comm completed from /proc/self/exe and
// argv[0] (/proc/self/cmdline).
std::string ProcessName();

// The same for process `pid` (/proc/<pid>/...; the executable's link is
// read only where permitted, argv[0] otherwise). Empty when it has gone.
std::string ProcessNameOf(int pid);

// Its command line (/proc/<pid>/cmdline), at most `max_args` arguments of at
// most `max_arg_bytes` bytes each.
std::vector<std::string> CommandLineOf(int pid, size_t max_args, size_t max_arg_bytes);

}  // namespace kerncap::agent

#endif  // KERNCAP_COMMON_AGENT_LINK_PROCESS_NAME_H_
