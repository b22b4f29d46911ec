#include "cli/huge_pages.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <string_view>

namespace myriad::cli {
namespace {

constexpr std::string_view kTunable = "glibc.malloc.hugetlb";

bool KernelGrantsOnRequest() {
  std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string mode;
  std::getline(f, mode);
  return mode.find("[madvise]") != std::string::npos;
}

}  // namespace

void ReexecWithHugePages(char** argv) {
  const char* opt_out = std::getenv("MYRIAD_HUGE_PAGES");
  if (opt_out != nullptr && std::string_view(opt_out) == "0") return;
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  if (tunables != nullptr && std::string_view(tunables).find(kTunable) != std::string_view::npos) return;
  if (!KernelGrantsOnRequest()) return;
  std::string value = std::string(kTunable) + "=1";
  if (tunables != nullptr && *tunables != '\0') value = std::string(tunables) + ":" + value;
  if (setenv("GLIBC_TUNABLES", value.c_str(), 1) != 0) return;
  execv("/proc/self/exe", argv);
  // Not re-executed (no /proc, or exec refused): run on as we are, without the tunable.
  unsetenv("GLIBC_TUNABLES");
  if (tunables != nullptr) setenv("GLIBC_TUNABLES", tunables, 1);
}

}  // namespace myriad::cli
