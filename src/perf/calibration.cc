#include "perf/calibration.h"

namespace myriad::perf {
namespace {

absl::StatusOr<StepModel> DeepSeekUnit(int nodes, const Calibration& cal) {
  auto gpu = FindGpu("H800");
  auto model = FindModel("DeepSeek-V3");
  if (!gpu.ok()) return gpu.status();
  if (!model.ok()) return model.status();
  UnitLayout layout{.tp = 1, .dp = nodes * 8, .ep = nodes * 8, .nodes = nodes, .redundant_experts = 32};
  // DeepSeek's nodes have 400 Gb/s CX7 InfiniBand per GPU.
  return StepModel::Create(*gpu, *model, layout, Fabric{.gpus_per_node = 8, .nic_gbps = 400}, cal);
}

}  // namespace

absl::StatusOr<double> DeepSeekPrefillTokensPerNode(const Calibration& cal) {
  auto unit = DeepSeekUnit(4, cal);
  if (!unit.ok()) return unit.status();
  constexpr int kSeqsPerRank = 4, kNew = 2048, kCached = 4989 - kNew;
  BatchShape b;
  b.prefill_seqs = int64_t{kSeqsPerRank} * 32;
  b.prefill_tokens = b.prefill_seqs * kNew;
  // Token j of a chunk attends to the cached prefix and to the j tokens before it.
  b.prefill_attended = static_cast<double>(b.prefill_seqs) * (double{kNew} * kCached + double{kNew} * (kNew + 1) / 2);
  const double step = NanosToSeconds(unit->StepTime(b));
  return static_cast<double>(b.prefill_tokens) / step / 4;
}

absl::StatusOr<double> DeepSeekDecodeTokensPerNode(const Calibration& cal) {
  auto unit = DeepSeekUnit(18, cal);
  if (!unit.ok()) return unit.status();
  BatchShape b;
  b.decode_seqs = 128 * 144;
  b.decode_context = b.decode_seqs * 4989;
  const double step = NanosToSeconds(unit->StepTime(b));
  return static_cast<double>(b.decode_seqs) / step / 18;
}

}  // namespace myriad::perf
