#pragma once
// Scale-in by sleep instead of release. A sleeping unit keeps its weights and drops its KV;
// waking it costs the weights' way back onto the GPUs (over PCIe from host memory, each GPU
// its own shard at once; nothing when they stayed on the GPU) plus warm-up and the readiness
// gate, instead of a cold start's node, weight load and communicator. Where the weights sleep
// sets the price: in host memory the GPUs are released (no GPU-hours; the node's host memory
// stays held for the unit), on the GPUs they stay held and are paid for while asleep. Pure.
#include <string_view>

#include "core/time.h"

namespace myriad::policy {

enum class SleepMode { kOff, kHost, kGpu };
std::string_view SleepModeName(SleepMode m);

struct SleepOptions {
  SleepMode mode = SleepMode::kOff;
  int max_sleeping = 0;            // per pool; units leaving beyond it are released
  double pcie_bytes_per_s = 25e9;  // host to device, per GPU
  Nanos warmup = kMinute;          // CUDA graphs and warm-up batches again
  Nanos readiness = 5 * kSecond;   // the known-answer gate before traffic
};

// Of `leaving` units a pool scales in, how many go to sleep (the rest are released), with
// `sleeping` of its units asleep already.
int UnitsToSleep(int leaving, int sleeping, const SleepOptions& o);
// Of `wanted` units a pool scales out, how many are woken (the rest start cold): sleepers
// first, they serve soonest.
int UnitsToWake(int wanted, int sleeping);
// From the wake call to serving, for a unit whose GPUs each hold `weight_bytes_per_gpu`.
Nanos WakeTime(double weight_bytes_per_gpu, const SleepOptions& o);
inline bool SleepHoldsGpus(const SleepOptions& o) { return o.mode == SleepMode::kGpu; }

}  // namespace myriad::policy
