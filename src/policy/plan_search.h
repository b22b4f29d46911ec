#pragma once
// The deployment planner's decisions (`myriad plan`, docs/plan.md): the fewest copies of a slice
// of serving units the step model allows, which copies count to try next for one deployment
// shape, which candidates form the cost/attainment frontier, and which one is chosen. Pure: the
// scores come from whoever ran the candidates (the simulator, driven by cli/plan_command.cc);
// nothing here runs, times or prints anything.
#include <cstddef>
#include <optional>
#include <span>
#include <vector>

#include "perf/step_model.h"

namespace myriad::policy {

// The most output tokens per second one unit can decode: its batch cap over the shortest step
// the step model gives that batch (every sequence at a context of one token), taken over batch
// sizes up to the cap, so no real context or mix can do better.
double DecodeTokensPerSecondBound(const perf::StepModel& model, int max_seqs_per_rank);

// The fewest copies of a slice whose decode bound covers the offered output tokens: with fewer,
// the decode queue grows without end, so no SLO can hold and the candidate need not be run.
// Prompt work has no such bound here: what the prefix caches save is known only by running.
int MinCopies(double slice_decode_tokens_per_s_bound, double offered_output_tokens_per_s);

// Bisects one shape's copies count in [min_copies, max_copies] for the fewest that meet the SLO
// target, assuming attainment does not fall when copies are added (each carries less load). The
// largest count is tried first: if even that fails, the shape is out of the budget.
class CopiesSearch {
 public:
  CopiesSearch(int min_copies, int max_copies);
  // The copies count to run next, or nullopt when the search is over.
  std::optional<int> Next() const;
  void Record(int copies, bool meets);
  // The fewest copies seen to meet the target.
  std::optional<int> Best() const { return best_; }

 private:
  int lo_;  // every count below lo_ fails (by the bound or by a run)
  int hi_;  // the largest count, until a run meets; then the fewest that met
  bool tried_max_ = false;
  bool done_ = false;
  std::optional<int> best_;
};

// A candidate's cost and attainment (the fraction of arrived requests within the SLO). A cost
// that is not finite (nothing within the SLO to divide by) puts it on no frontier and out of
// the choice.
struct PlanScore {
  double cost = 0;
  double attainment = 0;
};

// The frontier of cost against attainment: the candidates no other beats on both (cheaper and
// at least as good, or as cheap and better), in increasing cost. Ties keep the lower index.
// `myriad plan` ranks by the deployment's dollars per hour here: for one workload, what more
// spending buys in attainment.
std::vector<size_t> Frontier(std::span<const PlanScore> scores);

// The cheapest candidate whose attainment reaches `target` (ties: the lower index), if any.
// `myriad plan` ranks by dollars per million tokens within the SLO here.
std::optional<size_t> Choose(std::span<const PlanScore> scores, double target);

}  // namespace myriad::policy
