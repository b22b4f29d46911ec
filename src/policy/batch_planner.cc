#include "policy/batch_planner.h"

#include <algorithm>

namespace myriad::policy {

BatchPlanner::Step BatchPlanner::StartStep(int64_t decode_seqs, int64_t decode_context) const {
  return Step(std::max<int64_t>(limits_.step_tokens - decode_seqs, 0), decode_seqs, decode_context);
}

BatchPlanner::Step::Step(int64_t budget, int64_t decode_seqs, int64_t decode_context)
    : budget_(budget) {
  shape_.decode_seqs = decode_seqs;
  shape_.decode_context = decode_context;
}

int64_t BatchPlanner::Step::AddChunk(int64_t done, int64_t target) {
  const int64_t chunk = std::clamp<int64_t>(target - done, 0, std::max<int64_t>(budget_, 0));
  if (chunk == 0) return 0;
  budget_ -= chunk;
  shape_.prefill_tokens += chunk;
  shape_.prefill_attended += AttendedPositions(done, chunk);
  ++shape_.prefill_seqs;
  return chunk;
}

}  // namespace myriad::policy
