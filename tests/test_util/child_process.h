#pragma once
// A child process for tests that run Myriad's servers (or Prometheus) as real processes: its
// stdout and stderr go to files (the same file when only one is given), and it is stopped when
// the object goes: SIGTERM, then SIGKILL if it has not exited within two seconds.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

namespace myriad::test {

class ChildProcess {
 public:
  // args[0] is looked up in PATH when it has no '/'.
  ChildProcess(std::vector<std::string> args, const std::string& out, const std::string& err = "") {
    const int out_fd = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int err_fd = err.empty() ? out_fd : open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    pid_ = fork();
    if (pid_ == 0) {
      dup2(out_fd, STDOUT_FILENO);
      dup2(err_fd, STDERR_FILENO);
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execvp(argv[0], argv.data());
      _exit(127);
    }
    close(out_fd);
    if (err_fd != out_fd) close(err_fd);
  }
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  ~ChildProcess() { Stop(); }

  pid_t pid() const { return pid_; }
  // Sends `sig` and waits for the process to exit (SIGKILL after two seconds); returns its wait
  // status (-1 when it was not running).
  int Kill(int sig) {
    if (pid_ <= 0) return -1;
    kill(pid_, sig);
    int status = 0;
    pid_t done = 0;
    for (int i = 0; i < 200 && (done = waitpid(pid_, &status, WNOHANG)) == 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (done == 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, &status, 0);
    }
    pid_ = -1;
    return status;
  }
  void Stop() { Kill(SIGTERM); }

 private:
  pid_t pid_ = -1;
};

}  // namespace myriad::test
