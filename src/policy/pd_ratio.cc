#include "policy/pd_ratio.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace myriad::policy {

std::optional<OptionError> CheckPdRatioOptions(const PdRatioOptions& o) {
  const auto within = [](double v, double lo, double hi) { return std::isfinite(v) && v >= lo && v <= hi; };
  if (!within(o.high, 0.01, 100)) return OptionError{"high", "must be in [0.01, 100]"};
  if (!within(o.low, 0, 100)) return OptionError{"low", "must be in [0, 100]"};
  if (o.low >= o.high) return OptionError{"low", fmt::format("must be below high ({})", o.high)};
  if (!within(o.queue_high, 0, 1e6)) return OptionError{"queue_high", "must be in [0, 1000000]"};
  if (o.confirm < 0 || o.confirm > 24 * kHour) return OptionError{"confirm", "must be in [0s, 24h]"};
  if (o.dwell < 0 || o.dwell > 24 * kHour) return OptionError{"dwell", "must be in [0s, 24h]"};
  if (o.min_units < 1) return OptionError{"min_units", "must be at least 1"};
  return std::nullopt;
}

OptionFields PdRatioFields(PdRatioOptions& o) {
  return {.numbers = {{"high", &o.high}, {"low", &o.low}, {"queue_high", &o.queue_high}},
          .durations = {{"confirm", &o.confirm}, {"dwell", &o.dwell}}};
}

double Pressure(const PoolSignals& s, const PdRatioOptions& o) {
  const double queue = o.queue_high > 0 ? s.queue_per_unit / o.queue_high : 0;
  return std::max({s.utilisation, queue, s.latency_over_slo});
}

std::optional<RoleSwitch> PdRatioController::Decide(const PoolSignals& prefill, const PoolSignals& decode,
                                                    Nanos now) {
  const double p = Pressure(prefill, o_), d = Pressure(decode, o_);
  std::optional<PdSide> want;
  if (p >= o_.high && d <= o_.low && decode.units > o_.min_units) want = PdSide::kPrefill;
  if (d >= o_.high && p <= o_.low && prefill.units > o_.min_units) want = PdSide::kDecode;
  if (want != wanting_) {
    // A new imbalance (or none): the confirmation clock starts over, so a signal that dips
    // back across a threshold never accumulates toward a switch.
    wanting_ = want;
    since_ = now;
    return std::nullopt;
  }
  if (!want || now - since_ < o_.confirm) return std::nullopt;
  if (last_switch_ >= 0 && now - last_switch_ < o_.dwell) return std::nullopt;
  last_switch_ = now;
  since_ = now;  // the next switch needs the imbalance confirmed again, after the move
  ++switches_;
  const bool to_prefill = *want == PdSide::kPrefill;
  return RoleSwitch{
      .from = to_prefill ? PdSide::kDecode : PdSide::kPrefill,
      .to = *want,
      .reason = fmt::format("{} pressure {:.2f} >= {:.2f} while {} at {:.2f} <= {:.2f}", to_prefill ? "prefill" : "decode",
                            to_prefill ? p : d, o_.high, to_prefill ? "decode" : "prefill", to_prefill ? d : p, o_.low)};
}

}  // namespace myriad::policy
