#include "sim/unit.h"

#include <algorithm>
#include <optional>
#include <utility>

namespace myriad::sim {

Unit::Unit(UnitConfig cfg, const perf::StepModel& model, EventQueue& events, RequestTable& table,
           UnitHost& host)
    : cfg_(cfg),
      model_(model),
      work_(model),
      events_(events),
      table_(table),
      host_(host),
      planner_({.kv_capacity = cfg.kv_tokens > 0 ? cfg.kv_tokens : model.KvCapacityTokens(),
                .max_running = int64_t{cfg.max_seqs_per_rank} * model.layout().dp,
                .step_tokens = int64_t{cfg.max_batch_tokens_per_rank} * model.layout().dp}) {
  if (cfg.moe != nullptr) {
    const auto dp = static_cast<size_t>(model.layout().dp);
    moe_ = cfg.moe;
    ResetLiveRanks();
    rank_running_.assign(dp, 0);
    rank_context_.assign(dp, 0);
    rank_batches_.resize(dp);
    stats_.rank_busy_s.assign(dp, 0.0);
    stats_.rank_live_s.assign(dp, 0.0);
  }
}

void Unit::set_moe(const perf::MoeStepModel* moe) {
  if (cfg_.moe == nullptr) return;
  moe_ = moe != nullptr ? moe : cfg_.moe;
  ResetLiveRanks();
  Kick();
}

void Unit::ResetLiveRanks() {
  live_ranks_.clear();
  for (int r = 0; r < model_.layout().dp; ++r) {
    if (!moe_->dead(static_cast<size_t>(r))) live_ranks_.push_back(r);
  }
}

Nanos Unit::TimeStep(const perf::BatchShape& total) {
  if (moe_ == nullptr) return model_.StepTime(total);
  // Decode by rank as assigned; this step's prefill chunks spread evenly over the live ranks.
  for (size_t r = 0; r < rank_batches_.size(); ++r) {
    perf::BatchShape& b = rank_batches_[r];
    b = perf::BatchShape{};
    b.decode_seqs = rank_running_[r];
    b.decode_context = rank_context_[r];
  }
  const auto live = static_cast<int64_t>(live_ranks_.size());
  for (int64_t i = 0; i < live; ++i) {
    perf::BatchShape& b = rank_batches_[static_cast<size_t>(live_ranks_[static_cast<size_t>(i)])];
    b.prefill_tokens = total.prefill_tokens / live + (i < total.prefill_tokens % live ? 1 : 0);
    b.prefill_seqs = total.prefill_seqs / live + (i < total.prefill_seqs % live ? 1 : 0);
    b.prefill_attended = total.prefill_attended / static_cast<double>(live);
  }
  const perf::MoeStepResult res = moe_->Step(rank_batches_);
  for (size_t r = 0; r < rank_batches_.size(); ++r) stats_.rank_busy_s[r] += res.rank_busy_s[r];
  for (int r : live_ranks_) stats_.rank_live_s[static_cast<size_t>(r)] += res.total_s;
  return SecondsToNanos(res.total_s);
}

void Unit::ShrinkCache() {
  cache_.Shrink(CacheCapacityBlocks(), events_enabled_ ? &evicted_ : nullptr);
  PublishEvicted();
}

void Unit::PublishEvicted() {
  if (evicted_.empty()) return;
  host_.OnCacheRemoved(cfg_.id, evicted_);
  evicted_.clear();
}

void Unit::AddToCache(std::span<const BlockKey> blocks, size_t known) {
  known = std::min(known, blocks.size());
  const size_t first_new =
      known + cache_.Insert(blocks.subspan(known), CacheCapacityBlocks(), events_enabled_ ? &evicted_ : nullptr);
  PublishEvicted();
  if (events_enabled_ && first_new < blocks.size()) {
    host_.OnCacheStored(cfg_.id, static_cast<uint32_t>(first_new), blocks.subspan(first_new));
  }
}

size_t Unit::CacheCapacityBlocks() const {
  int64_t free_tokens = kv_capacity() - kv_used_;
  return free_tokens > 0 ? static_cast<size_t>(free_tokens / cfg_.block_tokens) : 0;
}

void Unit::EnqueuePrefill(uint32_t slot) {
  PushPrefill(slot);
  Kick();
}

void Unit::PushPrefill(uint32_t slot) {
  ReqState& r = table_[slot];
  PrefillItem item{slot, r.epoch, r.req.input_tokens + r.generated, 0, 0, 0, false};
  // Queued work is what the gateway charges a backend: the prompt less the prefix the router
  // expected to find cached (0 under load-only policies), corrected once the batch admits it
  // and the real hit is known. One load signal in both worlds, and no cache walk here.
  if (r.preemptions == 0 && r.generated == 0) {
    item.expected = std::clamp<int32_t>(r.expected_cached, 0, std::max(item.target - 1, 0));
  }
  queued_prefill_tokens_ += item.target - item.expected;
  // A preempted sequence goes first, it already waited its turn once; never while a step is
  // in flight, whose chunks belong to the leading items.
  if (r.preemptions > 0 && !busy_) prefill_.push_front(item);
  else prefill_.push_back(item);
}

void Unit::EnqueueDecode(uint32_t slot) {
  table_[slot].kv_held = false;
  decode_wait_.push_back(slot);
  Kick();
}

void Unit::ReleaseKv(int64_t tokens) {
  AccrueKv();
  kv_used_ -= tokens;
  Kick();
}

policy::UnitLoad Unit::Load() const {
  policy::UnitLoad l;
  l.queued_prefill_tokens = queued_prefill_tokens_;
  l.running = static_cast<int32_t>(running_);
  l.waiting = static_cast<int32_t>(prefill_.size() + decode_wait_.size());
  l.available = routable_;
  l.kv_usage = kv_capacity() > 0 ? static_cast<double>(kv_used_) / static_cast<double>(kv_capacity()) : 1.0;
  return l;
}

bool Unit::AdmitPrefill(PrefillItem& item) {
  if (item.admitted) return true;
  // The whole context is reserved: the unit's prefix cache lives in free KV, so a hit saves
  // compute, not room.
  if (!planner_.Admits(Kv(), item.target)) return false;
  ReqState& r = table_[item.slot];
  const size_t hit_blocks = cache_.MatchAndTouch(r.req.blocks);
  // At least one token is always computed: the engine needs the last position's logits.
  const int32_t cached = std::min<int32_t>(static_cast<int32_t>(hit_blocks) * cfg_.block_tokens, item.target - 1);
  item.done = std::max(cached, 0);
  item.cached_blocks = static_cast<int32_t>(hit_blocks);
  item.admitted = true;
  queued_prefill_tokens_ -= item.done - item.expected;
  kv_used_ += item.target;
  r.kv_reserved = item.target;
  ShrinkCache();
  if (r.cached_tokens < 0) {
    r.cached_tokens = item.done;
    stats_.cached_tokens += item.done;
  }
  r.prefill_unit = cfg_.id;
  return true;
}

void Unit::AdmitDecodes() {
  while (!decode_wait_.empty() && planner_.HasSeat(running_)) {
    uint32_t slot = decode_wait_.front();
    ReqState& r = table_[slot];
    if (!r.kv_held) {
      const int32_t need = r.req.input_tokens + r.generated;
      if (!planner_.Admits(Kv(), need)) break;
      kv_used_ += need;
      r.kv_reserved = need;
      r.kv_held = true;
    }
    decode_wait_.pop_front();
    ++stats_.decode_admitted;
    JoinDecode(slot);
  }
  ShrinkCache();
}

void Unit::JoinDecode(uint32_t slot) {
  ReqState& r = table_[slot];
  r.decode_unit = cfg_.id;
  const int32_t remaining = r.req.output_tokens - r.generated;
  if (remaining <= 0) {
    r.kv_held = true;
    FinishSeq(slot);
    return;
  }
  r.decoding = true;
  holds_fill_ |= r.fill;
  r.join_step = step_;
  r.gen_at_join = r.generated;
  ++running_;
  running_context_ += r.kv_reserved;
  if (!rank_running_.empty()) {
    // The live DP rank running the fewest (the first such).
    int best = live_ranks_.front();
    for (int k : live_ranks_) {
      if (rank_running_[static_cast<size_t>(k)] < rank_running_[static_cast<size_t>(best)]) best = k;
    }
    r.rank = static_cast<int16_t>(best);
    ++rank_running_[static_cast<size_t>(best)];
    rank_context_[static_cast<size_t>(r.rank)] += r.kv_reserved;
  }
  finishes_.Push(step_, {step_ + remaining, slot, r.epoch});
  admission_order_.emplace_back(slot, r.epoch);
  if (r.first_token < 0) awaiting_first_.emplace_back(slot, r.epoch);
}

void Unit::FinishSeq(uint32_t slot) {
  ReqState& r = table_[slot];
  const int64_t held = KvHeld(r);
  if (r.decoding) {
    --running_;
    running_context_ -= held;
    r.decoding = false;
    if (!rank_running_.empty()) {
      --rank_running_[static_cast<size_t>(r.rank)];
      rank_context_[static_cast<size_t>(r.rank)] -= held;
    }
  }
  r.generated = r.req.output_tokens;
  kv_used_ -= held;
  r.kv_held = false;
  host_.OnRequestDone(cfg_.id, slot);
}

void Unit::Preempt(uint32_t slot) {
  ReqState& r = table_[slot];
  const int64_t held = KvHeld(r);
  r.generated = r.gen_at_join + static_cast<int32_t>(step_ - r.join_step);
  r.decoding = false;
  r.kv_held = false;
  ++r.epoch;
  ++r.preemptions;
  --running_;
  running_context_ -= held;
  kv_used_ -= held;
  if (!rank_running_.empty()) {
    --rank_running_[static_cast<size_t>(r.rank)];
    rank_context_[static_cast<size_t>(r.rank)] -= held;
  }
  ++stats_.preemptions;
  // vLLM's recompute preemption: the KV is dropped and rebuilt by a prefill later.
  PushPrefill(slot);
}

void Unit::EnsureGrowthRoom() {
  while (planner_.MustPreempt(Kv())) {
    const std::optional<size_t> victim = policy::BatchPlanner::Victim(
        admission_order_.size(),
        [this](size_t i) {
          const auto [slot, epoch] = admission_order_[i];
          const ReqState& r = table_[slot];
          return r.epoch == epoch && r.decoding && r.decode_unit == cfg_.id;
        },
        [this](size_t i) { return int64_t{table_[admission_order_[i].first].fill}; }, int64_t{holds_fill_});
    if (!victim) {
      admission_order_.clear();  // only stale entries left
      break;
    }
    const uint32_t slot = admission_order_[*victim].first;
    // A fill victim may have interactive sequences admitted after it; any other victim is the
    // last running one: it goes with the stale entries after it.
    if (table_[slot].fill) admission_order_.erase(admission_order_.begin() + static_cast<ptrdiff_t>(*victim));
    else admission_order_.resize(*victim);
    Preempt(slot);
  }
}

void Unit::Halt() {
  halted_ = true;
  ++incarnation_;  // the step in flight never finishes
  // Its finishing sequences go back to the wheel, due with the next step the unit completes.
  for (const FinishWheel::Entry& f : step_due_) finishes_.Push(step_, f);
  step_due_.clear();
  busy_ = false;
  Publish();
}

int64_t Unit::Evacuate(std::vector<uint32_t>* out) {
  AccrueKv();
  int64_t lost = 0;
  for (const PrefillItem& item : prefill_) {
    ReqState& r = table_[item.slot];
    if (r.epoch != item.epoch) continue;
    if (item.admitted) lost += item.done;
    out->push_back(item.slot);
  }
  for (uint32_t slot : decode_wait_) {
    if (table_[slot].kv_held) lost += table_[slot].kv_reserved;
    out->push_back(slot);
  }
  for (auto [slot, epoch] : admission_order_) {
    ReqState& r = table_[slot];
    if (r.epoch != epoch || !r.decoding || r.decode_unit != cfg_.id) continue;
    lost += KvHeld(r);
    r.generated = Generated(r);
    r.decoding = false;
    out->push_back(slot);
  }
  for (uint32_t slot : *out) {
    ReqState& r = table_[slot];
    ++r.epoch;
    r.kv_held = false;
    r.kv_reserved = 0;
  }
  prefill_.clear();
  queued_prefill_tokens_ = 0;
  chunks_.clear();
  decode_wait_.clear();
  finishes_.Clear();
  step_due_.clear();
  admission_order_.clear();
  awaiting_first_.clear();
  running_ = running_context_ = 0;
  std::fill(rank_running_.begin(), rank_running_.end(), 0);
  std::fill(rank_context_.begin(), rank_context_.end(), 0);
  kv_used_ = 0;
  busy_ = false;
  ++incarnation_;
  DropCache();
  return lost;
}

void Unit::DropCache() {
  cache_.Clear(events_enabled_ ? &evicted_ : nullptr);
  PublishEvicted();
  Publish();
}

void Unit::set_capacity_fraction(double f) {
  f = std::clamp(f, 0.0, 1.0);
  const auto scale = [f](int64_t full) { return std::max<int64_t>(1, static_cast<int64_t>(static_cast<double>(full) * f)); };
  planner_.set_limits({.kv_capacity = scale(cfg_.kv_tokens > 0 ? cfg_.kv_tokens : model_.KvCapacityTokens()),
                       .max_running = scale(int64_t{cfg_.max_seqs_per_rank} * model_.layout().dp),
                       .step_tokens = scale(int64_t{cfg_.max_batch_tokens_per_rank} * model_.layout().dp)});
  Publish();
  Kick();
}

void Unit::Resume() {
  halted_ = false;
  Kick();
}

void Unit::Kick() {
  StartStepIfIdle();
  Publish();
}

void Unit::PauseUntil(Nanos until) {
  const Nanos from = std::max(events_.now(), paused_until_);
  if (until > from) stats_.paused += until - from;
  paused_until_ = std::max(paused_until_, until);
  Kick();
}

void Unit::StartStepIfIdle() {
  if (busy_ || halted_) return;
  if (events_.now() < paused_until_) {
    if (!wake_scheduled_) {
      wake_scheduled_ = true;
      events_.At(paused_until_, [this] {
        wake_scheduled_ = false;
        Kick();
      });
    }
    return;
  }
  AccrueKv();
  AdmitDecodes();
  EnsureGrowthRoom();
  // Lazy deletions accumulate in the LIFO list; compact it now and then.
  if (admission_order_.size() > 2 * static_cast<size_t>(running_) + 1024) {
    std::erase_if(admission_order_, [this](const std::pair<uint32_t, uint32_t>& e) {
      const ReqState& r = table_[e.first];
      return !(r.epoch == e.second && r.decoding && r.decode_unit == cfg_.id);
    });
  }

  policy::BatchPlanner::Step step = planner_.StartStep(running_, running_context_);
  chunks_.clear();
  step.FillPrefills(
      prefill_.size(), [this](size_t i) { return AdmitPrefill(prefill_[i]); },
      [this](size_t i) { return std::pair<int64_t, int64_t>(prefill_[i].done, prefill_[i].target); },
      [this](size_t, int64_t chunk) { chunks_.push_back(static_cast<int32_t>(chunk)); });
  if (step.empty()) return;
  if (step_log_ != nullptr) step_log_->push_back(step.shape());
  busy_ = true;
  step_decode_seqs_ = running_;
  step_work_ = work_.Work(step.shape());
  Nanos duration = std::max<Nanos>(TimeStep(step.shape()), 1);
  if (slowdown_ != 1.0) duration = static_cast<Nanos>(static_cast<double>(duration) * slowdown_);
  step_duration_ = duration;
  // The requests that finish with this step leave the wheel now, while its bucket's nodes are
  // walked anyway, and their state starts loading: both are read when the step ends, and the
  // misses hide behind everything that runs meanwhile. (A sequence joining during the step
  // and finishing with it is taken from the wheel at the end.)
  if (step_decode_seqs_ > 0) {
    finishes_.TakeDue(step_ + 1, &step_due_);
    for (const FinishWheel::Entry& f : step_due_) table_[f.slot].Prefetch();
    finishes_.PrefetchBucket(step_ + 2);
  }
  events_.After(duration, [this, inc = incarnation_] {
    if (inc == incarnation_) OnStepDone();
  });
}

void Unit::OnStepDone() {
  const Nanos duration = step_duration_;
  busy_ = false;
  stats_.busy += duration;
  ++stats_.steps;
  stats_.seq_seconds += static_cast<double>(step_decode_seqs_) * NanosToSeconds(duration);
  stats_.flops += step_work_.flops;
  stats_.hbm_bytes += step_work_.hbm_bytes;
  AccrueKv();
  const Nanos now = events_.now();

  if (step_decode_seqs_ > 0) {
    ++step_;
    stats_.decode_tokens += running_;
    stats_.batch_seq_sum += static_cast<double>(running_);
    running_context_ += running_;
    for (size_t rk = 0; rk < rank_running_.size(); ++rk) rank_context_[rk] += rank_running_[rk];
    kv_used_ += running_;
    finishes_.TakeDue(step_, &due_);  // any that joined during the step
    if (due_.empty()) {
      due_.swap(step_due_);
    } else {
      due_.insert(due_.end(), step_due_.begin(), step_due_.end());
      FinishWheel::SortEntries(&due_);
    }
    step_due_.clear();
    for (auto [slot, epoch] : awaiting_first_) table_[slot].Prefetch();  // read at once, not one by one
    for (auto [slot, epoch] : awaiting_first_) {
      ReqState& r = table_[slot];
      if (r.epoch == epoch && r.first_token < 0) r.first_token = now;
    }
    awaiting_first_.clear();
    for (const FinishWheel::Entry& f : due_) {
      const ReqState& r = table_[f.slot];
      if (r.epoch != f.epoch || !r.decoding || r.decode_unit != cfg_.id) continue;
      FinishSeq(f.slot);
    }
  }

  // Chunks went to the leading items in order, so completed items form a prefix.
  for (int32_t chunk : chunks_) {
    PrefillItem& item = prefill_.front();
    item.done += chunk;
    queued_prefill_tokens_ -= chunk;
    ReqState& r = table_[item.slot];
    if (r.generated > 0) stats_.recompute_tokens += chunk;
    else stats_.prefill_tokens += chunk;
    if (item.done < item.target) break;
    const uint32_t slot = item.slot;
    const size_t known = static_cast<size_t>(item.cached_blocks);
    prefill_.pop_front();
    AddToCache(r.req.blocks, known);
    r.kv_held = true;
    if (cfg_.role == Role::kPrefill) {
      host_.OnPrefillDone(cfg_.id, slot);
      continue;
    }
    // The prefill step's logits give the next token: the first, or after a recompute (as
    // vLLM's engine and emu::Engine do) the one after the output so far.
    if (r.first_token < 0) r.first_token = now;
    host_.OnPrefillToken(cfg_.id, slot);
    ++r.generated;
    ++stats_.decode_tokens;
    // A request that has just produced its last token finishes now: it needs no seat.
    if (planner_.HasSeat(running_) || r.generated >= r.req.output_tokens) JoinDecode(slot);
    else decode_wait_.push_front(slot);
  }
  chunks_.clear();
  Kick();
}

}  // namespace myriad::sim
