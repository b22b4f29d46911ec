#pragma once
// A link whose bandwidth is shared by whoever is using it at the moment (processor sharing):
// shared storage serving weight loads. Each flow gets total x weight / (sum of weights), at
// most its own cap; rates are recomputed whenever a flow starts or ends.
#include <cstdint>
#include <functional>
#include <vector>

#include "sim/event_queue.h"

namespace myriad::sim {

class SharedBandwidth {
 public:
  SharedBandwidth(EventQueue& events, double bytes_per_s) : events_(events), total_(bytes_per_s) {}

  // Moves `bytes` for a flow of `weight` (e.g. its node count) capped at `cap_bytes_per_s`;
  // `done` runs when the last byte arrives.
  void Start(double bytes, double weight, double cap_bytes_per_s, std::function<void()> done);
  size_t active() const { return flows_.size(); }
  double peak_flows() const { return peak_; }

 private:
  struct Flow {
    double remaining, weight, cap, rate = 0;
    std::function<void()> done;
  };
  void Advance();
  void Reschedule();

  EventQueue& events_;
  double total_;
  std::vector<Flow> flows_;
  Nanos last_ = 0;
  uint64_t generation_ = 0;
  double peak_ = 0;
};

}  // namespace myriad::sim
