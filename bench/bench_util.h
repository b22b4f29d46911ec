#pragma once
// Helpers shared by the benchmarks.
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace myriad {

// Process memory from /proc/self/status ("VmRSS" or "VmHWM"), in MiB; 0 when unavailable.
inline double ProcMiB(const char* field) {
  std::FILE* f = std::fopen("/proc/self/status", "r");
  if (f == nullptr) return 0;
  char line[256];
  double kib = 0;
  const size_t n = std::strlen(field);
  while (std::fgets(line, sizeof line, f) != nullptr) {
    if (std::strncmp(line, field, n) == 0 && line[n] == ':') kib = std::atof(line + n + 1);
  }
  std::fclose(f);
  return kib / 1024;
}

}  // namespace myriad
