#include "policy/autoscaler.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace myriad::policy {
namespace {

// A pool this busy is saturated: what it is short of hides in its queues, so its utilisation
// says nothing of a unit's capacity, and it grows as a pool past its SLO does.
constexpr double kSaturated = 0.9;

}  // namespace

SeasonalForecast::SeasonalForecast(Nanos period, int buckets, std::vector<double> profile, double learn_rate)
    : period_(std::max<Nanos>(period, 1)),
      buckets_(std::max(buckets, 1)),
      learned_(static_cast<size_t>(std::max(buckets, 1)), 0.0),
      learn_rate_(learn_rate) {
  if (!profile.empty()) {
    // The profile's slices are resampled onto the buckets.
    profile_.resize(static_cast<size_t>(buckets_));
    for (int b = 0; b < buckets_; ++b) {
      profile_[static_cast<size_t>(b)] = profile[static_cast<size_t>(b) * profile.size() / static_cast<size_t>(buckets_)];
    }
  }
}

int SeasonalForecast::Bucket(Nanos t) const {
  const Nanos in = ((t % period_) + period_) % period_;
  return static_cast<int>(static_cast<__int128>(in) * buckets_ / period_);
}

void SeasonalForecast::Observe(Nanos now, double rate) {
  const int b = Bucket(now);
  if (b != open_bucket_) {
    // A bucket is learned only once it is complete: a half-seen slice of today must not stand
    // for tomorrow's whole slice.
    if (open_bucket_ >= 0 && open_n_ > 0) {
      double& l = learned_[static_cast<size_t>(open_bucket_)];
      const double mean = open_sum_ / static_cast<double>(open_n_);
      l = l > 0 ? l + learn_rate_ * (mean - l) : mean;
    }
    open_bucket_ = b;
    open_sum_ = 0;
    open_n_ = 0;
  }
  open_sum_ += rate;
  ++open_n_;
}

double SeasonalForecast::Shape(Nanos t) const {
  const auto b = static_cast<size_t>(Bucket(t));
  if (learned_[b] > 0) return learned_[b];
  return profile_.empty() ? 0 : profile_[b];
}

double SeasonalForecast::Predict(Nanos now, double rate_now, Nanos at) const {
  // Learned and configured curves are not mixed in one ratio: their scales differ.
  const auto bn = static_cast<size_t>(Bucket(now)), ba = static_cast<size_t>(Bucket(at));
  if (learned_[bn] > 0 && learned_[ba] > 0) return rate_now * learned_[ba] / learned_[bn];
  if (!profile_.empty() && profile_[bn] > 0) return rate_now * profile_[ba] / profile_[bn];
  return rate_now;
}

int SeasonalForecast::learned_buckets() const {
  return static_cast<int>(std::count_if(learned_.begin(), learned_.end(), [](double v) { return v > 0; }));
}

double DecodeLatencyOverSlo(const DecodeWindow& w, Nanos tpot_slo, Nanos ttft_slo) {
  const double step = w.steps > 0 ? w.busy_s / w.steps / NanosToSeconds(tpot_slo) : 0;
  double wait = 0;
  if (w.waiting > 0) wait = w.admitted > 0 ? w.waiting * w.window_s / w.admitted : w.window_s;
  return std::max(step, wait / NanosToSeconds(ttft_slo));
}

Autoscaler::Autoscaler(ScalerOptions o, SeasonalForecast forecast) : o_(o), forecast_(std::move(forecast)) {}

std::optional<ScaleAction> Autoscaler::Decide(const ScalerSignals& s, Nanos now) {
  forecast_.Observe(now, s.arrival_rate);
  if (rate_ < 0) {
    rate_ = s.arrival_rate;
  } else {
    const double a = 1 - std::exp(-NanosToSeconds(now - rate_time_) / std::max(1e-9, NanosToSeconds(o_.smoothing)));
    rate_ += a * (s.arrival_rate - rate_);
  }
  rate_time_ = now;
  history_.emplace_back(now, rate_);
  while (history_.size() > 1 && now - history_[1].first >= o_.trend_window) history_.pop_front();
  // A unit's capacity, from how busy the pool is at the rate it takes; a nearly idle pool says
  // little (fixed costs dominate) and a saturated one hides how much it is short (the excess
  // waits in queues), so neither is sampled.
  if (s.serving > 0 && s.utilisation >= 0.1 && s.utilisation <= kSaturated && s.arrival_rate > 0) {
    const double sample = s.arrival_rate / (s.serving * s.utilisation);
    unit_capacity_ = unit_capacity_ > 0 ? unit_capacity_ + 0.2 * (sample - unit_capacity_) : sample;
  }
  const int current = s.serving + s.starting;
  const Nanos ahead = now + o_.lead_time;
  const double seasonal = forecast_.Predict(now, rate_, ahead);
  double rise = 0;
  if (history_.size() > 1 && now > history_.front().first) {
    rise = std::max(0.0, (rate_ - history_.front().second) / NanosToSeconds(now - history_.front().first));
  }
  const double forecast = std::max(seasonal, rate_ + rise * NanosToSeconds(o_.lead_time));
  int desired = current;
  std::string why;
  if (unit_capacity_ > 0) {
    desired = static_cast<int>(std::ceil(forecast * (1 + o_.headroom) / (unit_capacity_ * o_.target_utilisation)));
    why = fmt::format("forecast {:.0f}/s at +{} (+{:.0f}% headroom) at {:.1f}/s per unit", forecast,
                      FormatDuration(o_.lead_time), 100 * o_.headroom, unit_capacity_ * o_.target_utilisation);
  }
  // The latency and saturation are the last word: such a pool grows whatever the forecast says
  // (the learned capacity assumes load linear in the rate, which a batch that slows as it grows
  // is not).
  if ((s.latency_over_slo > 1 || s.utilisation > kSaturated) && s.serving > 0) {
    const int pressed = s.serving + std::max(1, (s.serving + 9) / 10);
    if (pressed > desired) {
      desired = std::max(desired, pressed);
      why = s.latency_over_slo > 1 ? fmt::format("latency {:.2f}x the SLO", s.latency_over_slo)
                                   : fmt::format("utilisation {:.2f}, saturated", s.utilisation);
    }
  }
  desired = std::clamp(desired, o_.min_units, o_.max_units);
  const double need_in = desired;  // what scale-in compares, before the margin
  if (desired > current) {
    below_since_ = -1;
    return ScaleAction{.delta = desired - current, .ready_by = ahead, .desired = desired, .forecast = forecast,
                       .reason = why.empty() ? "below min_units" : why};
  }
  if (s.starting > 0 || need_in > current * (1 - o_.scale_in_margin) || current <= o_.min_units) {
    below_since_ = -1;
    return std::nullopt;
  }
  if (below_since_ < 0) below_since_ = now;
  if (now - below_since_ < o_.scale_in_dwell) return std::nullopt;
  below_since_ = now;  // the next step down waits a whole dwell again
  const int step = std::max(1, static_cast<int>(current * o_.scale_in_step));
  const int remove = std::min(current - desired, step);
  return ScaleAction{.delta = -remove, .ready_by = now, .desired = desired, .forecast = forecast,
                     .reason = fmt::format("need {} < {} units for {}; {}", desired, current,
                                           FormatDuration(o_.scale_in_dwell), why)};
}

}  // namespace myriad::policy

namespace myriad::policy {

std::optional<OptionError> CheckScalerOptions(const ScalerOptions& o) {
  const auto within = [](double v, double lo, double hi) { return std::isfinite(v) && v >= lo && v <= hi; };
  const auto in = [](Nanos v, Nanos lo, Nanos hi) { return v >= lo && v <= hi; };
  if (!within(o.target_utilisation, 0.05, 1)) return OptionError{"target_utilisation", "must be in [0.05, 1]"};
  if (!within(o.headroom, 0, 10)) return OptionError{"headroom", "must be in [0, 10]"};
  if (!in(o.lead_time, 0, kHour)) return OptionError{"lead_time", "must be in [0s, 1h]"};
  if (!in(o.scale_in_dwell, 0, 24 * kHour)) return OptionError{"scale_in_dwell", "must be in [0s, 24h]"};
  if (!within(o.scale_in_margin, 0, 0.9)) return OptionError{"scale_in_margin", "must be in [0, 0.9]"};
  if (!within(o.scale_in_step, 0.01, 1)) return OptionError{"scale_in_step", "must be in [0.01, 1]"};
  if (!in(o.smoothing, kMillisecond, kHour)) return OptionError{"smoothing", "must be in [1ms, 1h]"};
  if (!in(o.trend_window, kMillisecond, kHour)) return OptionError{"trend_window", "must be in [1ms, 1h]"};
  if (o.min_units < 1) return OptionError{"min", "must be at least 1"};
  if (o.max_units < o.min_units) return OptionError{"max", fmt::format("must be at least min ({})", o.min_units)};
  return std::nullopt;
}

OptionFields ScalerFields(ScalerOptions& o) {
  return {.numbers = {{"target_utilisation", &o.target_utilisation},
                      {"headroom", &o.headroom},
                      {"scale_in_margin", &o.scale_in_margin},
                      {"scale_in_step", &o.scale_in_step}},
          .durations = {{"lead_time", &o.lead_time},
                        {"scale_in_dwell", &o.scale_in_dwell},
                        {"smoothing", &o.smoothing},
                        {"trend_window", &o.trend_window}}};
}

std::optional<OptionError> CheckForecast(Nanos period, int buckets) {
  if (period < kMinute || period > 7 * 24 * kHour) return OptionError{"period", "must be in [1m, 168h]"};
  if (buckets < 1 || buckets > kMaxForecastBuckets) {
    return OptionError{"buckets", fmt::format("must be in [1, {}]", kMaxForecastBuckets)};
  }
  return std::nullopt;
}

}  // namespace myriad::policy
