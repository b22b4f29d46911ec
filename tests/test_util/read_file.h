#pragma once
// A file's whole text, for tests that check what a command or server wrote.
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace myriad::test {

// The bytes of `p` ("" when it cannot be read).
inline std::string ReadFile(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace myriad::test
