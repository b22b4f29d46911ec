#pragma once
// The GPU catalog. Figures are dense (no sparsity) peak numbers from the vendors' data sheets,
// as collected in shared/reference/PUBLIC_DATA.md ("Hardware").
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace myriad::perf {

struct GpuSpec {
  std::string name;
  double bf16_tflops = 0;
  double fp8_tflops = 0;
  double hbm_gb = 0;           // capacity, 1e9 bytes
  double hbm_tbps = 0;         // bandwidth, 1e12 bytes/s
  double nvlink_gbps_bidir = 0;  // 1e9 bytes/s, both directions together
  double watts = 0;

  double hbm_bytes() const { return hbm_gb * 1e9; }
  double hbm_bytes_per_s() const { return hbm_tbps * 1e12; }
  // Usable NVLink bandwidth per direction. DeepSeek measured ~160 GB/s of H800's 200 GB/s per
  // direction (PUBLIC_DATA.md), i.e. 80%; the same fraction is assumed for every part.
  double nvlink_usable_bytes_per_s() const { return nvlink_gbps_bidir / 2 * 0.8 * 1e9; }
};

absl::StatusOr<GpuSpec> FindGpu(std::string_view name);
std::vector<std::string> GpuNames();

}  // namespace myriad::perf
