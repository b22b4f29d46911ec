#pragma once
// The state of every request in flight, in slots reused after completion so memory follows
// the number in flight, not the number simulated.
#include <cstdint>
#include <memory>
#include <vector>

#include "sim/workload.h"

namespace myriad::sim {

// The state a request's steps read first (epoch, flags, units) comes first, then the request
// with its scalars before its inline block keys: finishing a request touches the first two of
// its three cache lines, and they are fetched together.
struct alignas(64) ReqState {
  Nanos first_token = -1;
  int32_t cached_tokens = -1;  // prefix-cache hit on the first prefill; -1 before it
  int32_t generated = 0;       // output tokens produced (while not decoding on a unit)
  int32_t prefill_unit = -1;
  int32_t decode_unit = -1;
  uint32_t epoch = 0;          // bumped on preemption to invalidate stale bookkeeping
  uint16_t preemptions = 0;
  int16_t rank = 0;            // DP rank decoding it (units with a per-rank model)
  bool live = false;
  bool decoding = false;       // in some unit's running decode batch
  bool kv_held = false;        // its KV is reserved on the unit that holds it in a queue
  uint8_t retries = 0;         // times re-routed after a unit failed under it
  int32_t kv_reserved = 0;     // KV tokens reserved for it (at join, while decoding)
  int64_t join_step = 0;       // unit step counter when it joined the decode batch
  int32_t gen_at_join = 0;
  uint32_t src_incarnation = 0;  // of the prefill unit when its KV left for decode
  bool corrupt = false;          // served by a unit with silent data corruption
  bool decode_charged = false;   // decode_unit's hand-off charge holds it (Unit::ChargeDecode)
  bool fill = false;             // a low-priority fill tenant's: preempted first (policy/tenant_fill.h)
  int32_t expected_cached = 0;   // the router's expected prefix hit (fits the first line's padding)
  Request req;

  // Starts loading the lines that a step reading this request's state touches.
  void Prefetch() const {
    __builtin_prefetch(this);
    __builtin_prefetch(reinterpret_cast<const char*>(this) + 64);
  }
};

class RequestTable {
 public:
  uint32_t Add(Request&& r) {
    uint32_t slot;
    if (!free_.empty()) {
      slot = free_.back();
      free_.pop_back();
      // Fresh state in place (assigning a temporary would copy its unused inline key space).
      std::destroy_at(&slots_[slot]);
      std::construct_at(&slots_[slot]);
    } else {
      slot = static_cast<uint32_t>(slots_.size());
      slots_.emplace_back();
    }
    slots_[slot].req = std::move(r);
    slots_[slot].live = true;
    ++live_;
    return slot;
  }
  void Release(uint32_t slot) {
    slots_[slot].req.blocks = {};
    slots_[slot].live = false;
    free_.push_back(slot);
    --live_;
  }
  ReqState& operator[](uint32_t slot) { return slots_[slot]; }
  const ReqState& operator[](uint32_t slot) const { return slots_[slot]; }
  size_t live() const { return live_; }
  size_t capacity() const { return slots_.size(); }

 private:
  std::vector<ReqState> slots_;
  std::vector<uint32_t> free_;
  size_t live_ = 0;
};

}  // namespace myriad::sim
