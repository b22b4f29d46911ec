#include "policy/plan_search.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/time.h"

namespace myriad::policy {

double DecodeTokensPerSecondBound(const perf::StepModel& model, int max_seqs_per_rank) {
  const int64_t cap = int64_t{std::max(max_seqs_per_rank, 1)} * model.layout().dp;
  double best = 0;
  // Powers of two and the cap itself: tokens per second need not be monotone in the batch when
  // a term switches from compute- to memory-bound, so the bound is the largest seen.
  for (int64_t b = 1;; b = std::min(b * 2, cap)) {
    perf::BatchShape shape;
    shape.decode_seqs = b;
    shape.decode_context = b;
    const double step_s = NanosToSeconds(model.StepTime(shape));
    if (step_s > 0) best = std::max(best, static_cast<double>(b) / step_s);
    if (b == cap) break;
  }
  return best;
}

int MinCopies(double slice_decode_tokens_per_s_bound, double offered_output_tokens_per_s) {
  if (!(offered_output_tokens_per_s > 0)) return 1;
  if (!(slice_decode_tokens_per_s_bound > 0)) return std::numeric_limits<int>::max();
  const double copies = std::ceil(offered_output_tokens_per_s / slice_decode_tokens_per_s_bound);
  if (copies >= static_cast<double>(std::numeric_limits<int>::max())) return std::numeric_limits<int>::max();
  return std::max(1, static_cast<int>(copies));
}

CopiesSearch::CopiesSearch(int min_copies, int max_copies) : lo_(std::max(min_copies, 1)), hi_(max_copies) {
  done_ = hi_ < lo_;
}

std::optional<int> CopiesSearch::Next() const {
  if (done_) return std::nullopt;
  if (!tried_max_) return hi_;
  return lo_ + (hi_ - lo_) / 2;
}

void CopiesSearch::Record(int copies, bool meets) {
  if (done_) return;
  if (!tried_max_) {
    tried_max_ = true;
    if (!meets) {
      done_ = true;
      return;
    }
    best_ = copies;
    hi_ = copies;
  } else if (meets) {
    best_ = copies;
    hi_ = copies;
  } else {
    lo_ = copies + 1;
  }
  done_ = lo_ >= hi_;
}

std::vector<size_t> Frontier(std::span<const PlanScore> scores) {
  std::vector<size_t> order(scores.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (scores[a].cost != scores[b].cost) {
      return scores[a].cost < scores[b].cost;
    }
    return scores[a].attainment > scores[b].attainment;
  });
  std::vector<size_t> out;
  double best_attainment = -1;
  for (size_t i : order) {
    // Cost is +inf for a candidate with nothing within the SLO: it is on no frontier.
    if (!std::isfinite(scores[i].cost)) continue;
    if (scores[i].attainment > best_attainment) {
      out.push_back(i);
      best_attainment = scores[i].attainment;
    }
  }
  return out;
}

std::optional<size_t> Choose(std::span<const PlanScore> scores, double target) {
  std::optional<size_t> best;
  for (size_t i = 0; i < scores.size(); ++i) {
    if (scores[i].attainment < target || !std::isfinite(scores[i].cost)) continue;
    if (!best || scores[i].cost < scores[*best].cost) best = i;
  }
  return best;
}

}  // namespace myriad::policy
