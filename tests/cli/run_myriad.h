#pragma once
// Runs the built `myriad` binary as a user would, for the CLI tests.
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

namespace myriad::testing {

struct CommandResult {
  int code;
  std::string out;  // stdout and stderr together
};

// `env` (e.g. "FOO=1 BAR=2") is set for the command only.
inline CommandResult RunMyriad(const std::string& args, const std::string& env = "") {
  const std::string cmd = (env.empty() ? "" : "env " + env + " ") + std::string(MYRIAD_BINARY) + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  std::array<char, 4096> buf;
  while (size_t n = fread(buf.data(), 1, buf.size(), p)) out.append(buf.data(), n);
  const int status = pclose(p);
  return {WEXITSTATUS(status), out};
}

// Writes `text` to a file under the temporary directory and returns its path.
inline std::string WriteTempFile(const std::string& name, const std::string& text) {
  auto path = std::filesystem::temp_directory_path() / ("myriad_test_" + name);
  std::ofstream(path) << text;
  return path.string();
}

}  // namespace myriad::testing
