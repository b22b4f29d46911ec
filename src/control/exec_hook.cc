#include "control/exec_hook.h"

#include <fmt/format.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>
#include <vector>

#include "core/steady_now.h"

extern char** environ;

namespace myriad::control {

absl::Status RunHook(const HookCall& call, Nanos timeout) {
  // The environment is built before fork: the child may only call async-signal-safe functions.
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    const std::string_view v(*e);
    if (!v.starts_with("MYRIAD_ACTION=") && !v.starts_with("MYRIAD_TARGET=") &&
        !v.starts_with("MYRIAD_TARGET_URL=") && !v.starts_with("MYRIAD_REASON=") && !v.starts_with("MYRIAD_ROLE=") &&
        !v.starts_with("MYRIAD_COUNT=")) {
      env.emplace_back(v);
    }
  }
  env.push_back("MYRIAD_ACTION=" + call.action);
  env.push_back("MYRIAD_TARGET=" + call.target);
  env.push_back("MYRIAD_TARGET_URL=" + call.target_url);
  env.push_back("MYRIAD_REASON=" + call.reason);
  if (!call.role.empty()) env.push_back("MYRIAD_ROLE=" + call.role);
  if (call.count > 0) env.push_back("MYRIAD_COUNT=" + std::to_string(call.count));
  std::vector<char*> envp;
  for (auto& s : env) envp.push_back(s.data());
  envp.push_back(nullptr);
  const char* argv[] = {"/bin/sh", "-c", call.command.c_str(), nullptr};
  const pid_t pid = fork();
  if (pid < 0) return absl::InternalError(fmt::format("exec hook '{}': fork failed", call.command));
  if (pid == 0) {
    execve("/bin/sh", const_cast<char* const*>(argv), envp.data());
    _exit(127);
  }
  const Nanos deadline = SteadyNow() + timeout;
  int status = 0;
  while (true) {
    const pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (done < 0) return absl::InternalError(fmt::format("exec hook '{}': waitpid failed", call.command));
    if (SteadyNow() >= deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return absl::DeadlineExceededError(
          fmt::format("exec hook '{}' killed after {}", call.command, FormatDuration(timeout)));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return absl::OkStatus();
  return absl::InternalError(WIFEXITED(status)
                                 ? fmt::format("exec hook '{}' exited {}", call.command, WEXITSTATUS(status))
                                 : fmt::format("exec hook '{}' killed by signal {}", call.command, WTERMSIG(status)));
}

}  // namespace myriad::control
