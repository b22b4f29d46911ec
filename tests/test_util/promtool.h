#pragma once
// Lints a Prometheus exposition with the real `promtool check metrics` (Debian package
// prometheus, installed by scripts/setup.sh), as a scraper's operator would before trusting it.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "temp_dir.h"

namespace myriad::testing {

// A complaint the test accepts on purpose: promtool's `message` about a metric whose name
// starts with `name_prefix`. Only for names fixed by someone else's contract (vLLM's).
struct PromtoolWaiver {
  std::string_view name_prefix;
  std::string_view message;
};

// promtool's complaints about `exposition`, one per line ("<metric> <problem>"), minus the
// waived ones. A missing promtool fails the test: the check must not pass by not running.
inline std::vector<std::string> PromtoolComplaints(const std::string& exposition,
                                                   const std::vector<PromtoolWaiver>& waivers = {}) {
  if (std::system("command -v promtool >/dev/null 2>&1") != 0) {
    ADD_FAILURE() << "promtool is not installed: scripts/setup.sh installs it (Debian package prometheus)";
    return {"promtool missing"};
  }
  static int n = 0;
  const std::string path = (TestTempDir() / ("exposition_" + std::to_string(n++) + ".prom")).string();
  std::ofstream(path, std::ios::binary) << exposition;
  FILE* p = popen(("promtool check metrics < '" + path + "' 2>&1").c_str(), "r");
  std::string out;
  std::array<char, 4096> buf;
  while (size_t got = fread(buf.data(), 1, buf.size(), p)) out.append(buf.data(), got);
  const int status = pclose(p);
  std::vector<std::string> complaints;
  size_t at = 0;
  while (at < out.size()) {
    size_t end = out.find('\n', at);
    if (end == std::string::npos) end = out.size();
    std::string line = out.substr(at, end - at);
    at = end + 1;
    if (line.empty()) continue;
    bool waived = false;
    for (const PromtoolWaiver& w : waivers) {
      const size_t space = line.find(' ');
      if (space != std::string::npos && line.compare(0, w.name_prefix.size(), w.name_prefix) == 0 &&
          std::string_view(line).substr(space + 1) == w.message) {
        waived = true;
      }
    }
    if (!waived) complaints.push_back(std::move(line));
  }
  // Exit 1 is an exposition promtool could not parse: a complaint even without a message.
  if (WIFEXITED(status) && WEXITSTATUS(status) == 1 && complaints.empty()) {
    complaints.push_back("promtool could not parse the exposition");
  }
  return complaints;
}

}  // namespace myriad::testing
