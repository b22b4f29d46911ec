#include "sim/shared_bandwidth.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace myriad::sim {

void SharedBandwidth::Advance() {
  const double dt = NanosToSeconds(events_.now() - last_);
  last_ = events_.now();
  for (Flow& f : flows_) f.remaining = std::max(0.0, f.remaining - f.rate * dt);
}

void SharedBandwidth::Start(double bytes, double weight, double cap_bytes_per_s, std::function<void()> done) {
  Advance();
  flows_.push_back({std::max(bytes, 0.0), std::max(weight, 1e-9), cap_bytes_per_s, 0, std::move(done)});
  peak_ = std::max(peak_, static_cast<double>(flows_.size()));
  Reschedule();
}

void SharedBandwidth::Reschedule() {
  // Finish every flow that is done (within a byte), in start order.
  std::vector<std::function<void()>> finished;
  for (size_t i = 0; i < flows_.size();) {
    if (flows_[i].remaining <= 1.0) {
      finished.push_back(std::move(flows_[i].done));
      flows_.erase(flows_.begin() + static_cast<std::ptrdiff_t>(i));
    } else {
      ++i;
    }
  }
  double weights = 0;
  for (const Flow& f : flows_) weights += f.weight;
  double next = std::numeric_limits<double>::infinity();
  for (Flow& f : flows_) {
    f.rate = std::min(f.cap, total_ * f.weight / weights);
    next = std::min(next, f.remaining / f.rate);
  }
  const uint64_t gen = ++generation_;
  if (!flows_.empty()) {
    events_.After(static_cast<Nanos>(std::ceil(next * 1e9)), [this, gen] {
      if (gen != generation_) return;  // superseded by a later start or finish
      Advance();
      Reschedule();
    });
  }
  for (auto& f : finished) f();
}

}  // namespace myriad::sim
