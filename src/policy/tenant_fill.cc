#include "policy/tenant_fill.h"

#include <algorithm>
#include <cmath>

namespace myriad::policy {

void DecodePressure::Decay(Nanos now, double* sum, double* weight) const {
  const double f = now > time_ ? std::exp(-static_cast<double>(now - time_) / static_cast<double>(window_)) : 1.0;
  *sum = sum_ * f;
  *weight = weight_ * f;
}

void DecodePressure::Observe(Nanos now, Nanos tpot) {
  if (tpot < 0 || tpot_slo_ <= 0) return;
  Decay(now, &sum_, &weight_);
  time_ = std::max(time_, now);
  sum_ += static_cast<double>(tpot) / static_cast<double>(tpot_slo_);
  weight_ += 1;
}

double DecodePressure::Load(Nanos now) const {
  double sum = 0, weight = 0;
  Decay(now, &sum, &weight);
  // Less weight than one sample three windows old: nothing finished lately, nothing pressed.
  return weight >= std::exp(-3.0) ? sum / weight : 0;
}

}  // namespace myriad::policy
