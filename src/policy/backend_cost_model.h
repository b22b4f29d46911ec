#pragma once
// What one backend (or class of identical backends) really takes to produce a first token,
// learned online from its observed first-token times, so that the router's TTFT estimate
// prices a CPU engine as a CPU engine even when the configured performance model is a GPU.
//
// The model is a line, T = fixed + a*uncached + b*cached + q*queued (tokens queued on the
// backend at dispatch) + w*slot_waits (on an engine with a fixed number of slots, the requests
// that must finish before this one gets a slot: SlotWaits in router.h), fitted by least squares over the last `window` samples, each weighted
// by 1/T^2 (a first token's noise grows with its time, and the fixed term is only seen in
// the short ones; T the larger of the observed and the predicted time):
// - seeded from the configured model (the prior): until the first sample the router prices
//   with the prior itself; after it, the fit is pulled toward the prior's shape (its
//   linearization's fixed, cached and queued terms in proportion to its uncached term) with
//   the weight of `prior_samples` samples, not toward its speed: a backend seen 100x slower
//   than its prior, without cache hits or queueing yet, is assumed 100x slower on those too,
//   and terms the samples do not tell apart (all prompts of one size) keep the prior's split.
// - robust: each sample's residual against the current fit is clipped (Huber-style) at `clip`
//   times a running median of relative residuals, so a stall or a request stuck behind a long
//   one moves the fit by a bounded amount, while a real change of speed (every residual large)
//   raises the scale within tens of samples and is followed.
// - bounded: the window is a fixed ring; old samples leave it, so the fit follows a backend
//   that changes (a new engine version, a neighbour on the host).
// - non-negative: a coefficient that would fit below zero is held at zero.
// - ageing: a backend the router stops choosing sends no samples, so one slow sample could
//   price it out for good. After `stale_after` without a sample its price drifts from the fit
//   toward the prior (half the remaining way every `stale_half_life`), until the router tries
//   it again; the sample that comes back is weighed against the old ones discounted by the same
//   factor, so the fit follows what the backend does now. Time is the driver's `now`.
// Pure and deterministic: the same samples in the same order give the same fit.
#include <cstdint>
#include <vector>

#include "core/time.h"
#include "policy/prefill_cost.h"

namespace myriad::policy {

// One dispatch and what came of it.
struct CostSample {
  int64_t uncached = 0;  // prompt tokens the router expected the backend to compute
  int64_t cached = 0;    // prompt tokens the router expected it to hold
  int64_t queued = 0;    // prompt tokens queued on it when this one was sent (its load signal)
  int64_t slot_waits = 0;  // requests that had to finish before it got a slot (router.h SlotWaits)
  double seconds = 0;    // from dispatch to the first token
};

struct CostCoefficients {
  double fixed_s = 0;
  double per_uncached_s = 0;  // per prompt token computed
  double per_cached_s = 0;    // per prompt token served from the prefix cache
  double per_queued_s = 0;    // per prompt token waited behind
  double per_slot_wait_s = 0;  // per request waited for to free a slot
  double Predict(int64_t uncached, int64_t cached, int64_t queued, int64_t slot_waits = 0) const {
    return fixed_s + per_uncached_s * static_cast<double>(uncached) + per_cached_s * static_cast<double>(cached) +
           per_queued_s * static_cast<double>(queued) + per_slot_wait_s * static_cast<double>(slot_waits);
  }
};

// Upper bound of the window (samples kept per backend): memory is 56 bytes a sample.
inline constexpr int kMaxCostWindow = 4096;
// Upper bound of the ageing times (a day).
inline constexpr Nanos kMaxCostStaleness = 86400 * kSecond;

struct BackendCostModelOptions {
  int window = 256;          // samples kept, 4..kMaxCostWindow
  double prior_samples = 2;  // the prior's weight, in samples of typical size
  double clip = 4;           // residuals beyond clip x the running scale are clipped
  // Where the prior's curve (quadratic in the prompt) is replaced by its chord: tokens of a
  // typical prompt.
  int64_t reference_tokens = 2048;
  // Ageing (see above); stale_after 0: never. Both 0..kMaxCostStaleness; a half-life of 0 is 1 ns.
  Nanos stale_after = 30 * kSecond;
  Nanos stale_half_life = 30 * kSecond;
};

class BackendCostModel {
 public:
  explicit BackendCostModel(const PrefillCost& prior, BackendCostModelOptions options = {});

  // Learns from one first token, which came at `now` (the clock Age is given). Samples with a
  // non-finite or negative time are ignored.
  void Observe(const CostSample& s, Nanos now = 0);
  // Re-prices for `now`: the fit while it is fresh, drifting toward the prior once stale. The
  // drivers call it before routing; cost() keeps its address.
  void Age(Nanos now) {
    if (priced_freshness_ == 1 && (samples_ == 0 || options_.stale_after <= 0 || now - last_at_ <= options_.stale_after)) {
      return;
    }
    Reprice(Freshness(now));
  }
  // How much the fit's evidence counts at `now`: 1 until stale_after past the last sample.
  double Freshness(Nanos now) const;
  // When the last sample came (the clock Observe was given); meaningless before the first.
  Nanos last_sample_at() const { return last_at_; }
  // The freshness cost() is priced with now (1: the fit itself; Age updates it).
  double priced_freshness() const { return priced_freshness_; }

  // What the router prices the backend with: the prior until the first sample, then the fit.
  const PrefillCost& cost() const { return cost_; }
  // The fit (the prior's linearization until the first sample).
  const CostCoefficients& coefficients() const { return fit_; }
  const CostCoefficients& prior() const { return prior_; }
  // Samples observed in all, and how many of them were clipped as outliers.
  uint64_t samples() const { return samples_; }
  uint64_t clipped() const { return clipped_; }
  size_t window_size() const { return ring_.size(); }
  // The running median of |relative residual|: how far off the model typically is.
  double relative_scale() const { return scale_; }

 private:
  static constexpr int kTerms = 5;
  struct Row {
    double x[kTerms];
    double y;
    double w;  // 1 / max(y, predicted)^2: residuals count relative to the first-token time
  };
  void Add(const Row& r, double sign);
  void Recount();
  void Refit();
  // cost_ from the fit weighted by `freshness` and the prior by the rest.
  void Reprice(double freshness);

  BackendCostModelOptions options_;
  PrefillCost cost_;
  double kv_bytes_per_token_ = 0;
  CostCoefficients prior_, fit_;
  // The prior's fixed, per-cached, per-queued and per-slot-wait terms over its per-uncached one.
  double fixed_ratio_ = 0, cached_ratio_ = 0, queued_ratio_ = 0, wait_ratio_ = 0;
  std::vector<Row> ring_;
  size_t next_ = 0;  // where the next row goes once the ring is full
  // Sums over the ring: x x^T and x y.
  double xx_[kTerms][kTerms] = {};
  double xy_[kTerms] = {};
  uint64_t samples_ = 0, clipped_ = 0;
  int64_t waited_rows_ = 0;  // rows in the ring that waited for a slot
  uint64_t since_recount_ = 0;
  double scale_ = 0;
  Nanos last_at_ = 0;             // the last sample's time
  double priced_freshness_ = 1;  // what cost_ was priced with
};

}  // namespace myriad::policy
