#pragma once
// The scheduling decisions of a vLLM-style continuous-batching engine, made once for both
// engines Myriad has: the emulator (emu::Engine, real time) and the simulator's serving units
// (sim::Unit, virtual time). Each engine keeps its own queues, cache and timing; every choice of
// who takes KV, who runs in a step, what the step costs and who is preempted is asked here, so
// the two cannot drift apart.
//
// KV is counted in whatever unit the engine allocates (tokens in the simulator, blocks in the
// emulator). `used` is what admitted sequences hold; prefix-cache blocks that no sequence
// references count as free, since the engine evicts them on demand.
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>

#include "perf/step_model.h"

namespace myriad::policy {

struct BatchLimits {
  int64_t kv_capacity = 0;  // KV units the engine has
  int64_t max_running = 1;  // sequences in the decode batch (vLLM's max_num_seqs)
  int64_t step_tokens = 1;  // tokens computed per step: one per decode plus prefill chunks
};

// What the engine's KV looks like when a decision is asked.
struct KvState {
  int64_t used = 0;    // units held by admitted sequences
  int64_t growth = 0;  // units the running sequences add with their next decode step
};

class BatchPlanner {
 public:
  explicit BatchPlanner(BatchLimits limits) : limits_(limits) {}
  // Elastic capacity: the engine's KV, seats or budget change while it runs.
  void set_limits(BatchLimits limits) { limits_ = limits; }
  const BatchLimits& limits() const { return limits_; }

  // vLLM's 1% of the KV kept free at admission, so that the running batch can grow a while
  // before anything is preempted.
  int64_t watermark() const { return limits_.kv_capacity / 100; }

  // A waiting sequence (a prompt to prefill, or a context received by P/D) that must newly
  // reserve `need` units (its context, less the cached prefix blocks it will share) is admitted
  // when the running sequences' next growth and the watermark still fit after it. An empty
  // engine admits anything within its capacity: the watermark protects other sequences'
  // growth, and refusing would block the queue forever.
  bool Admits(const KvState& kv, int64_t need) const {
    if (kv.used == 0 && kv.growth == 0) return need <= limits_.kv_capacity;
    return kv.used + need + kv.growth + watermark() <= limits_.kv_capacity;
  }
  // Whether a sequence whose prompt is computed may join the decode batch now (else it waits,
  // first in line, keeping its KV).
  bool HasSeat(int64_t running) const { return running < limits_.max_running; }

  // When the running sequences' next step no longer fits, the engine preempts (recompute: the
  // victim's KV is dropped and it goes back to waiting) until it does.
  bool MustPreempt(const KvState& kv) const { return kv.used + kv.growth > limits_.kv_capacity; }
  // The victim, vLLM's under priority scheduling: a running sequence of the lowest class (the
  // highest `demotion`, vLLM's request priority: a low-priority fill tenant's sequence,
  // policy/tenant_fill.h, goes before any interactive one), the last admitted of that class;
  // with one class, vLLM's default, the last admitted. `is_running(i)` and `demotion(i)` for
  // the i-th of the engine's `count` sequences, oldest first (engines may keep stale entries).
  // `top`: the highest demotion any sequence may have; the scan stops at the first running one
  // of it, so an engine that knows it holds one class scans no further than vLLM's default.
  template <class IsRunning, class Demotion>
  static std::optional<size_t> Victim(size_t count, IsRunning is_running, Demotion demotion,
                                      int64_t top = std::numeric_limits<int64_t>::max()) {
    std::optional<size_t> best;
    int64_t worst = 0;
    for (size_t i = count; i-- > 0;) {
      if (!is_running(i)) continue;
      const int64_t d = demotion(i);
      if (!best || d > worst) {
        best = i;
        worst = d;
        if (d >= top) break;
      }
    }
    return best;
  }

  class Step;
  Step StartStep(int64_t decode_seqs, int64_t decode_context) const;

  // Tokens that attend to `done + 1`, ..., `done + chunk` positions: a prompt's chunk after
  // `done` tokens already have KV (causal attention, each token sees itself and those before).
  static double AttendedPositions(int64_t done, int64_t chunk) {
    const double a = static_cast<double>(done), b = static_cast<double>(done + chunk);
    return (b * (b + 1) - a * (a + 1)) / 2;
  }

 private:
  BatchLimits limits_;
};

// One step's batch, built in vLLM's order: every running sequence decodes one token (each
// counts against the token budget), then prompts waiting for prefill get chunks in arrival
// order while the budget lasts. The first prompt that cannot be admitted holds back the ones
// behind it (first come, first served: no overtaking by smaller prompts).
class BatchPlanner::Step {
 public:
  // The next prompt in line, `done` of its `target` tokens computed: the tokens it computes
  // this step (0 when the budget is spent).
  int64_t AddChunk(int64_t done, int64_t target);
  bool full() const { return budget_ <= 0; }
  bool empty() const { return shape_.decode_seqs == 0 && shape_.prefill_tokens == 0; }
  const perf::BatchShape& shape() const { return shape_; }

  // Drives the whole prefill part: for the engine's `count` waiting prompts, in arrival order,
  // `admit(i)` reserves the i-th one's KV if it fits (true when it already holds it),
  // `progress(i)` returns {done, target}, and `take(i, chunk)` hands it its chunk. Returns how
  // many prompts got a chunk (always the leading ones).
  template <class Admit, class Progress, class Take>
  size_t FillPrefills(size_t count, Admit admit, Progress progress, Take take) {
    size_t i = 0;
    for (; i < count && !full(); ++i) {
      if (!admit(i)) break;
      const auto [done, target] = progress(i);
      take(i, AddChunk(done, target));
    }
    return i;
  }

 private:
  friend class BatchPlanner;
  Step(int64_t budget, int64_t decode_seqs, int64_t decode_context);
  int64_t budget_;
  perf::BatchShape shape_;
};

}  // namespace myriad::policy
