#include "perf/hardware.h"

#include <fmt/format.h>

#include "core/strings.h"

namespace myriad::perf {
namespace {

const std::vector<GpuSpec>& Catalog() {
  // name, BF16, FP8 TFLOPS, HBM GB, HBM TB/s, NVLink GB/s bidirectional, board watts.
  static const std::vector<GpuSpec> kGpus = {
      {"H100", 989, 1979, 80, 3.35, 900, 700},
      {"H200", 989, 1979, 141, 4.8, 900, 700},
      {"H800", 989, 1979, 80, 3.35, 400, 700},
      {"B200", 2250, 4500, 180, 8.0, 1800, 1000},
  };
  return kGpus;
}

}  // namespace

absl::StatusOr<GpuSpec> FindGpu(std::string_view name) {
  for (const auto& g : Catalog()) {
    if (EqualsIgnoreCase(g.name, name)) return g;
  }
  return absl::NotFoundError(
      fmt::format("unknown GPU '{}' (known: {})", name, Join(GpuNames(), ", ")));
}

std::vector<std::string> GpuNames() {
  std::vector<std::string> names;
  for (const auto& g : Catalog()) names.push_back(g.name);
  return names;
}

}  // namespace myriad::perf
