#pragma once
// A serving unit modelled as an engine: continuous batching of decode sequences, chunked
// prefill under a per-step token budget, KV capacity from the HBM left after weights, a prefix
// cache over token-block keys, LIFO preemption with recompute when KV runs out, and a cap on
// running sequences. Those decisions are policy::BatchPlanner's, shared with the emulator; the
// unit keeps the bookkeeping that makes them fast at 10,000 GPUs. Step times come from
// perf::StepModel.
#include <cstdint>
#include <deque>
#include <span>
#include <vector>

#include "perf/moe_step.h"
#include "perf/step_model.h"
#include "perf/step_work.h"
#include "policy/batch_planner.h"
#include "policy/decode_load.h"
#include "policy/load_balancer.h"
#include "policy/load_ranking.h"
#include "sim/event_queue.h"
#include "sim/finish_wheel.h"
#include "policy/prefix_cache.h"
#include "sim/request_table.h"

namespace myriad::sim {

enum class Role { kPrefill, kDecode, kColocated };

struct UnitConfig {
  int id = 0;
  int pool = 0;
  Role role = Role::kColocated;
  int max_batch_tokens_per_rank = 8192;  // chunked-prefill budget per DP rank per step
  int max_seqs_per_rank = 128;           // running decode sequences per DP rank
  int block_tokens = 256;                // KV block size of the prefix cache
  int64_t kv_tokens = 0;                 // KV capacity; 0: the HBM the model leaves (the emulator's kv_blocks)
  // When set, steps are timed rank by rank (uneven DP batches, hot experts) instead of by the
  // evenly-loaded StepModel. Decode sequences go to the DP rank with the fewest.
  const perf::MoeStepModel* moe = nullptr;
};

// What a unit tells the cluster around it.
class UnitHost {
 public:
  virtual ~UnitHost() = default;
  // A prefill-role unit finished a prompt; its KV stays reserved until ReleaseKv.
  virtual void OnPrefillDone(int unit, uint32_t slot) = 0;
  // The request produced its last token.
  virtual void OnRequestDone(int unit, uint32_t slot) = 0;
  // A colocated or decode unit finished computing a prompt and produced a token from it.
  virtual void OnPrefillToken(int /*unit*/, uint32_t /*slot*/) {}
  // The unit's prefix cache gained or lost blocks (only when events are enabled): what an
  // engine's KV events would say.
  // `first_position` is the chain position of blocks[0].
  virtual void OnCacheStored(int /*unit*/, uint32_t /*first_position*/, std::span<const BlockKey> /*blocks*/) {}
  virtual void OnCacheRemoved(int /*unit*/, std::span<const BlockKey> /*blocks*/) {}
};

struct UnitStats {
  Nanos busy = 0;
  uint64_t steps = 0;
  int64_t prefill_tokens = 0;    // tokens computed in prefill (first time)
  int64_t recompute_tokens = 0;  // tokens computed again after preemption
  int64_t cached_tokens = 0;     // prompt tokens served from the prefix cache
  int64_t decode_tokens = 0;
  int64_t preemptions = 0;
  double batch_seq_sum = 0;      // sum over steps of decode batch size
  // Capacity used, integrated over time (utilisation in the report): running sequences x
  // step time, KV tokens held x time (up to the last change: Unit::KvTokenSeconds is current),
  // and the model's FLOPs and HBM bytes of the steps completed (perf::StepWorkModel).
  double seq_seconds = 0;
  double kv_token_seconds = 0;
  double flops = 0;
  double hbm_bytes = 0;
  std::vector<double> rank_busy_s;  // per DP rank, its own compute (per-rank model only)
  std::vector<double> rank_live_s;  // per DP rank, the unit's step time while the rank was live
  Nanos paused = 0;                 // stopped for weight movement
  int64_t decode_admitted = 0;      // sequences that left the wait for a decode slot
};

class Unit {
 public:
  Unit(UnitConfig cfg, const perf::StepModel& model, EventQueue& events, RequestTable& table,
       UnitHost& host);

  // Compute the request's KV here (its prompt, plus generated tokens after a preemption).
  void EnqueuePrefill(uint32_t slot);
  // The request's KV has arrived from a prefill unit; decode it here.
  void EnqueueDecode(uint32_t slot);
  // A handed-off request's KV has left this unit.
  void ReleaseKv(int64_t tokens);
  // Stop stepping until `until` (weights being moved); a step in flight finishes first.
  void PauseUntil(Nanos until);
  // Faults. Halt: the unit stops dead (crash, hang); the step in flight never completes and
  // its requests stay where they are until evacuated. Evacuate: every request the unit holds
  // is handed to `out` (decoding ones with the tokens produced so far) and the unit is reset
  // to empty, cache included, as a restarted engine is; returns the KV tokens thrown away.
  // Resume: it steps again.
  void Halt();
  int64_t Evacuate(std::vector<uint32_t>* out);
  void Resume();
  bool halted() const { return halted_; }
  // Bumped by Halt and Evacuate: KV reservations made before it are void.
  uint32_t incarnation() const { return incarnation_; }
  // Elastic EP: the unit serves with this fraction of its ranks (1: all), its KV capacity,
  // running sequences and step token budget scaled alike. Set on an empty unit when it
  // shrinks (after Evacuate); growing back may happen at any time.
  void set_capacity_fraction(double f);
  // Elastic EP on a rank-by-rank unit: step with `moe` (null: the pool's model again), whose
  // dead ranks take no DP batch: neither decode sequences nor prefill chunks. Shrinking is
  // done on an empty unit (after Evacuate); growing back may happen at any time.
  void set_moe(const perf::MoeStepModel* moe);
  // A slow rank stretches every synchronous step by this factor (1: healthy).
  void set_slowdown(double f) { slowdown_ = f; }
  double slowdown() const { return slowdown_; }
  // Whether the router may send work here (false: ejected, draining or rebuilding).
  void set_routable(bool r) {
    routable_ = r;
    Publish();
  }
  bool routable() const { return routable_; }
  // A lost cache tier: every cached prefix block is gone (reported as removed).
  void DropCache();
  // Appends every step's batch to `log` (null: none), as emu::Engine's step log does: tests
  // hold the two engines' plans side by side.
  void set_step_log(std::vector<perf::BatchShape>* log) { step_log_ = log; }
  // Report prefix-cache changes to the host as events.
  void EnableCacheEvents() { events_enabled_ = true; }
  // Leading blocks of `blocks` in this unit's prefix cache (an engine re-verifying a hint).
  size_t CachedPrefix(std::span<const BlockKey> blocks) const { return cache_.Count(blocks); }
  void PrefetchCachedPrefix(std::span<const BlockKey> blocks) const { cache_.PrefetchLookups(blocks); }
  // KV copied in from another unit lands in the prefix cache. The first `known` blocks were
  // just found there (and marked used): only the rest need inserting.
  void AddToCache(std::span<const BlockKey> blocks, size_t known = 0);

  policy::UnitLoad Load() const;
  // Where the unit keeps its current load for the router to read without touching the unit
  // (routing reads hundreds of loads per request; a contiguous array keeps that cheap), and
  // the ranking of those loads it keeps current (candidate `rank_index` of `ranking`).
  void PublishLoadTo(policy::UnitLoad* slot, policy::LoadRanking* ranking = nullptr, size_t rank_index = 0) {
    published_ = slot;
    ranking_ = ranking;
    rank_index_ = rank_index;
    Publish();
  }
  int64_t kv_capacity() const { return planner_.limits().kv_capacity; }
  // A decode unit: the router handed it a sequence of `tokens` prompt + output tokens (+1), or
  // one of them ended or left (-1). Its published load ranks by this charge
  // (policy/decode_load.h), as the gateway ranks decode engines by its own.
  void ChargeDecode(int sign, int64_t tokens) {
    decode_charge_.Apply(sign, tokens);
    Publish();
  }
  int64_t kv_used() const { return kv_used_; }
  // KV tokens held x seconds from the start of the run to `now` (not before the last change).
  double KvTokenSeconds(Nanos now) const {
    return stats_.kv_token_seconds + static_cast<double>(kv_used_) * NanosToSeconds(now - kv_since_);
  }
  bool idle() const { return !busy_ && prefill_.empty() && decode_wait_.empty() && running_ == 0; }
  const UnitConfig& config() const { return cfg_; }
  const UnitStats& stats() const { return stats_; }
  const perf::StepModel& model() const { return model_; }
  const perf::StepWorkModel& work_model() const { return work_; }
  size_t cached_blocks() const { return cache_.size(); }
  // Output tokens the request has produced so far, counting decode steps on this unit.
  int32_t Generated(const ReqState& r) const {
    return r.decoding ? r.gen_at_join + static_cast<int32_t>(step_ - r.join_step) : r.generated;
  }

 private:
  void ResetLiveRanks();  // live_ranks_ from moe_'s dead ranks
  struct PrefillItem {
    uint32_t slot;
    uint32_t epoch;
    int32_t target = 0;  // context tokens whose KV must exist when done
    int32_t done = 0;
    int32_t cached_blocks = 0;  // leading blocks found in the cache at admission (already touched)
    int32_t expected = 0;       // tokens the cache held when queued: not counted as queued work
    bool admitted = false;
  };

  void Kick();
  // Integrates the KV held up to now; called before anything that may change kv_used_.
  void AccrueKv() {
    stats_.kv_token_seconds = KvTokenSeconds(events_.now());
    kv_since_ = events_.now();
  }
  void StartStepIfIdle();
  void OnStepDone();
  bool AdmitPrefill(PrefillItem& item);
  void AdmitDecodes();
  void EnsureGrowthRoom();
  // What the planner is asked with: the KV held, and one token of growth per running sequence.
  policy::KvState Kv() const { return {kv_used_, running_}; }
  void Preempt(uint32_t slot);
  void JoinDecode(uint32_t slot);
  void FinishSeq(uint32_t slot);
  void PushPrefill(uint32_t slot);
  // KV tokens the request holds now: what was reserved plus one per decode step since.
  int64_t KvHeld(const ReqState& r) const {
    return r.kv_reserved + (r.decoding ? step_ - r.join_step : 0);
  }
  size_t CacheCapacityBlocks() const;
  void ShrinkCache();
  void PublishEvicted();

  UnitConfig cfg_;
  const perf::StepModel& model_;
  const perf::StepWorkModel work_;
  EventQueue& events_;
  RequestTable& table_;
  UnitHost& host_;
  // A fill tenant's sequence has decoded here (the preemption victim's scan looks past the
  // last admitted one only then).
  bool holds_fill_ = false;
  policy::BatchPlanner planner_;

  bool busy_ = false;
  bool halted_ = false;
  bool routable_ = true;
  uint32_t incarnation_ = 0;
  double slowdown_ = 1.0;
  Nanos step_duration_ = 0;
  Nanos paused_until_ = 0;
  bool wake_scheduled_ = false;
  int64_t kv_used_ = 0;
  Nanos kv_since_ = 0;  // when kv_token_seconds was last brought up to date
  policy::PrefixCache cache_;

  std::deque<PrefillItem> prefill_;
  int64_t queued_prefill_tokens_ = 0;
  std::vector<int32_t> chunks_;  // this step's chunk per leading prefill item

  std::deque<uint32_t> decode_wait_;
  int64_t step_ = 0;
  int64_t running_ = 0;
  int64_t running_context_ = 0;
  FinishWheel finishes_;
  std::vector<FinishWheel::Entry> due_;  // scratch of OnStepDone
  std::vector<FinishWheel::Entry> step_due_;  // finishing with the step in flight (taken at its start)
  std::vector<std::pair<uint32_t, uint32_t>> admission_order_;  // (slot, epoch), LIFO victims
  std::vector<std::pair<uint32_t, uint32_t>> awaiting_first_;   // joined with no token yet
  int64_t step_decode_seqs_ = 0;
  perf::StepWork step_work_;  // of the step in flight
  // Per-rank decode state, kept only with a per-rank model.
  const perf::MoeStepModel* moe_ = nullptr;  // the model steps use (cfg_.moe unless degraded)
  std::vector<int> live_ranks_;              // the DP ranks that take batches, in order
  std::vector<int64_t> rank_running_, rank_context_;
  std::vector<perf::BatchShape> rank_batches_;  // scratch
  Nanos TimeStep(const perf::BatchShape& total);

  UnitStats stats_;
  void Publish() {
    if (published_ == nullptr) return;
    *published_ = cfg_.role == Role::kDecode ? policy::DecodeLoad(decode_charge_, kv_capacity(), Load()) : Load();
    if (ranking_ != nullptr) ranking_->Update(rank_index_, *published_);
  }
  policy::DecodeCharge decode_charge_;
  policy::UnitLoad* published_ = nullptr;
  policy::LoadRanking* ranking_ = nullptr;
  size_t rank_index_ = 0;
  bool events_enabled_ = false;
  std::vector<BlockKey> evicted_;
  std::vector<perf::BatchShape>* step_log_ = nullptr;
};

}  // namespace myriad::sim
