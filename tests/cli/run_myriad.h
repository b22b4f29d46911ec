#pragma once
// Runs the built `myriad` binary as a user would, for the CLI tests, and gives each test its
// own temporary directory.
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "../test_util/temp_dir.h"

namespace myriad::testing {

struct CommandResult {
  int code;
  std::string out;  // stdout and stderr together
};

// Runs a shell command line, stdout and stderr together. A command killed by a signal (an
// abort, a stack overflow) reads as a shell reports it: 128 + the signal.
inline CommandResult RunShell(const std::string& command) {
  FILE* p = popen((command + " 2>&1").c_str(), "r");
  std::string out;
  std::array<char, 4096> buf;
  while (size_t n = fread(buf.data(), 1, buf.size(), p)) out.append(buf.data(), n);
  const int status = pclose(p);
  return {WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status), out};
}

// `env` (e.g. "FOO=1 BAR=2") is set for the command only. With `timeout_s` > 0 the command is
// killed after that long (code 137), so a hang fails the test instead of stalling the suite.
inline CommandResult RunMyriad(const std::string& args, const std::string& env = "", int timeout_s = 0) {
  const std::string limit = timeout_s > 0 ? "timeout -s KILL " + std::to_string(timeout_s) + " " : "";
  return RunShell((env.empty() ? "" : "env " + env + " ") + limit + std::string(MYRIAD_BINARY) + " " + args);
}

// Writes `text` to a file in the test's temporary directory and returns its path.
inline std::string WriteTempFile(const std::string& name, const std::string& text) {
  auto path = TestTempDir() / name;
  std::ofstream(path) << text;
  return path.string();
}

}  // namespace myriad::testing
