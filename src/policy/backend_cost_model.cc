#include "policy/backend_cost_model.h"

#include <algorithm>
#include <cmath>

namespace myriad::policy {

namespace {

// Relative residuals are taken against at least this many seconds: a prediction of ~0 (a
// GPU prior for a tiny prompt) must not turn every sample into an infinite outlier.
constexpr double kMinSeconds = 1e-3;
// The running scale never drops below 2%: noise-free samples would otherwise shrink it to
// nothing and then clip every sample after a real change of speed.
constexpr double kMinScale = 0.02;
// The running median moves by this factor a sample: about 40 samples from a prior 100x off
// to a well-fitted scale, and an outlier of any size moves it by one step only.
constexpr double kScaleStep = 1.2;
constexpr uint64_t kRefitEvery = 8;
constexpr double kInitialScale = 0.5;
constexpr double kRepriceStep = 0.01;
// Discounted weights stop here: far below any fresh sample's, and clear of denormals.
constexpr double kMinFreshness = 1e-9;

// Solves a x = b (n <= 5, symmetric positive definite in practice) by elimination with
// partial pivoting; false when singular.
template <int N>
bool Solve(double a[N][N], double b[N], int n, double x[N]) {
  for (int col = 0; col < n; ++col) {
    int pivot = col;
    for (int r = col + 1; r < n; ++r) {
      if (std::abs(a[r][col]) > std::abs(a[pivot][col])) pivot = r;
    }
    if (!(std::abs(a[pivot][col]) > 0)) return false;
    if (pivot != col) {
      for (int k = 0; k < n; ++k) std::swap(a[col][k], a[pivot][k]);
      std::swap(b[col], b[pivot]);
    }
    for (int r = col + 1; r < n; ++r) {
      const double f = a[r][col] / a[col][col];
      for (int k = col; k < n; ++k) a[r][k] -= f * a[col][k];
      b[r] -= f * b[col];
    }
  }
  for (int r = n - 1; r >= 0; --r) {
    double s = b[r];
    for (int k = r + 1; k < n; ++k) s -= a[r][k] * x[k];
    x[r] = s / a[r][r];
  }
  return true;
}

}  // namespace

BackendCostModel::BackendCostModel(const PrefillCost& prior, BackendCostModelOptions options)
    : options_(options), cost_(prior), kv_bytes_per_token_(prior.kv_bytes_per_token()) {
  options_.window = std::clamp(options_.window, 4, kMaxCostWindow);
  options_.prior_samples = std::max(options_.prior_samples, 1e-6);
  options_.clip = std::max(options_.clip, 1.0);
  options_.stale_after = std::clamp<Nanos>(options_.stale_after, 0, kMaxCostStaleness);
  options_.stale_half_life = std::clamp<Nanos>(options_.stale_half_life, 1, kMaxCostStaleness);
  const int64_t ref = std::max<int64_t>(options_.reference_tokens, 1);
  const double r = static_cast<double>(ref);
  const double base = prior.PrefillSeconds(0, 0);
  const double uncached = prior.PrefillSeconds(ref, 0);
  prior_.fixed_s = base;
  prior_.per_uncached_s = std::max(0.0, (uncached - base) / r);
  prior_.per_cached_s = std::max(0.0, (prior.PrefillSeconds(ref, ref) - uncached) / r);
  prior_.per_queued_s = std::max(0.0, prior.QueueSeconds(ref) / r);
  prior_.per_slot_wait_s = std::max(0.0, prior.SlotWaitSeconds(1));
  if (prior_.per_uncached_s > 0) {
    fixed_ratio_ = prior_.fixed_s / prior_.per_uncached_s;
    cached_ratio_ = prior_.per_cached_s / prior_.per_uncached_s;
    queued_ratio_ = prior_.per_queued_s / prior_.per_uncached_s;
    wait_ratio_ = prior_.per_slot_wait_s / prior_.per_uncached_s;
  }
  fit_ = prior_;
  ring_.reserve(static_cast<size_t>(options_.window));
}

void BackendCostModel::Add(const Row& r, double sign) {
  const double w = sign * r.w;
  if (r.x[4] > 0) waited_rows_ += sign > 0 ? 1 : -1;
  for (int i = 0; i < kTerms; ++i) {
    for (int j = 0; j < kTerms; ++j) xx_[i][j] += w * r.x[i] * r.x[j];
    xy_[i] += w * r.x[i] * r.y;
  }
}

void BackendCostModel::Recount() {
  // Sums kept by adding and subtracting drift by rounding; rebuilt once per window.
  for (auto& row : xx_) std::fill(std::begin(row), std::end(row), 0.0);
  std::fill(std::begin(xy_), std::end(xy_), 0.0);
  waited_rows_ = 0;
  for (const Row& r : ring_) Add(r, 1);
  since_recount_ = 0;
}

double BackendCostModel::Freshness(Nanos now) const {
  if (samples_ == 0 || options_.stale_after <= 0) return 1;
  const Nanos idle = now - last_at_ - options_.stale_after;
  if (idle <= 0) return 1;
  return std::exp2(-static_cast<double>(idle) / static_cast<double>(options_.stale_half_life));
}

void BackendCostModel::Reprice(double freshness) {
  // Re-pricing on every request would cost the drivers a rebuild each: steps of 1% suffice.
  if (freshness < 1 && std::abs(freshness - priced_freshness_) < kRepriceStep) return;
  priced_freshness_ = freshness;
  auto mix = [&](double fit, double prior) { return freshness * fit + (1 - freshness) * prior; };
  cost_ = PrefillCost::Linear(mix(fit_.fixed_s, prior_.fixed_s), mix(fit_.per_uncached_s, prior_.per_uncached_s),
                              mix(fit_.per_cached_s, prior_.per_cached_s), mix(fit_.per_queued_s, prior_.per_queued_s),
                              kv_bytes_per_token_, mix(fit_.per_slot_wait_s, prior_.per_slot_wait_s));
}

void BackendCostModel::Observe(const CostSample& s, Nanos now) {
  if (!std::isfinite(s.seconds) || s.seconds < 0) return;
  const double freshness = Freshness(now);
  if (freshness < 1) {
    // Evidence from before the gap counts for what it is still worth; the new sample is judged
    // against the fit (not the drifted price), with the scale widened as far as the old fit is
    // now doubted.
    for (Row& r : ring_) r.w *= std::max(freshness, kMinFreshness);
    Recount();
    scale_ = std::max(scale_, kInitialScale * (1 - freshness));
  }
  if (priced_freshness_ != 1) Reprice(1);
  last_at_ = std::max(last_at_, now);
  const int64_t uncached = std::max<int64_t>(s.uncached, 0), cached = std::max<int64_t>(s.cached, 0),
                queued = std::max<int64_t>(s.queued, 0), waits = std::max<int64_t>(s.slot_waits, 0);
  Row row{{1.0, static_cast<double>(uncached), static_cast<double>(cached), static_cast<double>(queued),
           static_cast<double>(waits)},
          s.seconds,
          0};
  const double predicted =
      cost_.QueueSeconds(queued) + cost_.SlotWaitSeconds(waits) + cost_.PrefillSeconds(uncached, cached);
  const double denom = std::max(predicted, kMinSeconds);
  const double rel = (s.seconds - predicted) / denom;
  if (samples_ == 0) {
    // Its distance from the prior says how wrong the configured model is, not how noisy the
    // backend is: the fit goes through it (the prior keeps no speed), and the scale starts
    // from a middling guess.
    scale_ = kInitialScale;
  } else {
    const double limit = options_.clip * scale_;
    if (std::abs(rel) > limit) {
      ++clipped_;
      row.y = std::max(0.0, predicted + std::copysign(limit, rel) * denom);
    }
    scale_ = std::max(kMinScale, std::abs(rel) > scale_ ? scale_ * kScaleStep : scale_ / kScaleStep);
  }
  // Relative to the larger of the time and its prediction: a first token that came early
  // (a cache hit the router did not know of) must not outweigh the rest.
  const double size = std::max({row.y, predicted, kMinSeconds});
  row.w = 1 / (size * size);
  ++samples_;
  if (ring_.size() < static_cast<size_t>(options_.window)) {
    ring_.push_back(row);
    Add(row, 1);
  } else {
    // Add(old, -1) then Add(row, 1), in one pass over the sums (each sum takes the same two
    // steps in the same order, so the same bits).
    const Row& old = ring_[next_];
    const double wo = -old.w, wn = row.w;
    for (int i = 0; i < kTerms; ++i) {
      for (int j = 0; j < kTerms; ++j) xx_[i][j] = xx_[i][j] + wo * old.x[i] * old.x[j] + wn * row.x[i] * row.x[j];
      xy_[i] = xy_[i] + wo * old.x[i] * old.y + wn * row.x[i] * row.y;
    }
    ring_[next_] = row;
    next_ = (next_ + 1) % ring_.size();
  }
  if (++since_recount_ >= static_cast<uint64_t>(options_.window)) Recount();
  // Once the window is full one sample moves the fit little, and the simulator feeds millions:
  // every kRefitEvery-th sample then.
  if (freshness < 1 || samples_ <= static_cast<uint64_t>(options_.window) || samples_ % kRefitEvery == 0) Refit();
}

void BackendCostModel::Refit() {
  const double n = static_cast<double>(ring_.size());
  double a[kTerms][kTerms], b[kTerms];
  for (int i = 0; i < kTerms; ++i) {
    for (int j = 0; j < kTerms; ++j) a[i][j] = xx_[i][j];
    b[i] = xy_[i];
  }
  // The prior as pseudo-samples: penalty w (v.theta - m)^2 adds w v v^T and w m v. Each term's
  // weight is prior_samples times the mean weighted square of its feature in the window (at
  // least one token's), so the prior counts as that many samples of typical size. It holds the prior's
  // shape (each term's ratio to the uncached one), not its speed: a speed 100x off would make
  // its pseudo-samples outliers that outweigh dozens of real ones. The shape alone leaves the
  // system regular: every sample has a positive component along it.
  auto penalize = [&](const double (&v)[kTerms], double w, double m) {
    for (int i = 0; i < kTerms; ++i) {
      for (int j = 0; j < kTerms; ++j) a[i][j] += w * v[i] * v[j];
      b[i] += w * m * v[i];
    }
  };
  const double k = options_.prior_samples;
  auto scale = [&](int t) { return std::max(xx_[t][t], xx_[0][0]) / n; };
  // The slot wait is seen only in the samples that waited, a few long ones that weigh little
  // against the many short ones (weights 1/T^2): its prior counts as prior_samples of those,
  // not of the window's typical sample, or it would hold the term at the prior for good.
  const double wait_scale = waited_rows_ > 0 ? xx_[4][4] / static_cast<double>(waited_rows_) : xx_[0][0] / n;
  if (prior_.per_uncached_s > 0) {
    penalize({1, -fixed_ratio_, 0, 0, 0}, k * scale(0), 0);
    penalize({0, -cached_ratio_, 1, 0, 0}, k * scale(2), 0);
    penalize({0, -queued_ratio_, 0, 1, 0}, k * scale(3), 0);
    penalize({0, -wait_ratio_, 0, 0, 1}, k * wait_scale, 0);
  } else {  // a prior without a per-token cost has no shape to keep: its values, then
    penalize({0, 1, 0, 0, 0}, k * scale(1), prior_.per_uncached_s);
    penalize({1, 0, 0, 0, 0}, k * scale(0), prior_.fixed_s);
    penalize({0, 0, 1, 0, 0}, k * scale(2), prior_.per_cached_s);
    penalize({0, 0, 0, 1, 0}, k * scale(3), prior_.per_queued_s);
    penalize({0, 0, 0, 0, 1}, k * wait_scale, prior_.per_slot_wait_s);
  }
  // Non-negative least squares by an active set: a term that fits below zero is held at zero
  // and the rest refitted (at most one round per term).
  bool free[kTerms] = {true, true, true, true, true};
  double theta[kTerms] = {};
  for (int round = 0; round < kTerms; ++round) {
    int idx[kTerms], m = 0;
    for (int t = 0; t < kTerms; ++t) {
      if (free[t]) idx[m++] = t;
    }
    double ra[kTerms][kTerms], rb[kTerms], rx[kTerms] = {};
    for (int i = 0; i < m; ++i) {
      for (int j = 0; j < m; ++j) ra[i][j] = a[idx[i]][idx[j]];
      rb[i] = b[idx[i]];
    }
    if (!Solve<kTerms>(ra, rb, m, rx)) return;  // keep the last fit
    std::fill(std::begin(theta), std::end(theta), 0.0);
    int worst = -1;
    for (int i = 0; i < m; ++i) {
      theta[idx[i]] = rx[i];
      if (rx[i] < 0 && (worst < 0 || rx[i] < theta[worst])) worst = idx[i];
    }
    if (worst < 0) break;
    free[worst] = false;
    theta[worst] = 0;
  }
  for (double& t : theta) t = std::max(t, 0.0);
  fit_ = CostCoefficients{theta[0], theta[1], theta[2], theta[3], theta[4]};
  cost_ = PrefillCost::Linear(fit_.fixed_s, fit_.per_uncached_s, fit_.per_cached_s, fit_.per_queued_s,
                              kv_bytes_per_token_, fit_.per_slot_wait_s);
  priced_freshness_ = 1;
}

}  // namespace myriad::policy
