#include "emu/engine.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include "absl/container/flat_hash_set.h"
#include "core/block_hash.h"
#include "core/rng.h"

namespace myriad::emu {

namespace {

// Same prompt, same answer (a known-answer probe at temperature 0 must find the answer it
// recorded), distinct prompts distinct answers.
uint64_t PromptHash(const std::vector<uint32_t>& prompt) {
  uint64_t h = 0x9e3779b97f4a7c15ULL ^ prompt.size();
  for (uint32_t t : prompt) h = Mix64(h ^ t);
  return h;
}

// The engine's own block hash chain: salted so that it differs from Myriad's BlockKeys, as
// vLLM's sha256-over-pickle hashes do; consumers must map it through the token ids.
constexpr uint64_t kEngineSalt = 0x76'6c'6c'6d'45'6d'75'31ULL;

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

struct Engine::Req {
  uint64_t id = 0;
  GenRequest in;
  std::vector<uint64_t> hashes;  // engine hashes of the prompt's full blocks
  // The context whose KV a prefill computes: the prompt, plus the output so far after a
  // preemption.
  int64_t target = 0;
  int64_t prefilled = 0;  // of target
  int64_t kv_tokens = 0;  // tokens of KV held while decoding
  int64_t cached = 0;     // prompt tokens found in the cache at the first admission
  int64_t store_cached = 0;  // of which loaded from the store tier
  // The store tier: the blocks asked for (those past the HBM prefix that the HBM did not
  // hold), then those read, used by the next admission only.
  std::vector<uint64_t> asked;
  std::vector<uint64_t> loaded;
  int generated = 0;
  int64_t private_blocks = 0;  // reserved: the context's blocks
  bool remote = false;    // its KV arrives by P/D (until a preemption drops it)
  bool admitted = false;  // holds KV
  bool seen = false;      // admitted once: counted in the prefix-cache stats
  bool decoding = false;  // in running_
  bool done = false;
  Clock::time_point ready_at{};  // remote prefill: when the KV transfer completes
  uint64_t serial = 0;
  uint64_t prompt_hash = 0;  // the output tokens are a function of the prompt, as greedy decoding's
  // The slot profile: the slot taken (kept after release, for the answer), the output so far
  // (the slot keeps it cached), and the emulated time of its prefill and decode steps.
  int slot = -1;
  std::vector<uint32_t> out;
  double prompt_ms = 0, decode_ms = 0;
};

absl::StatusOr<std::unique_ptr<Engine>> Engine::Create(EngineOptions o) {
  absl::StatusOr<perf::GpuSpec> gpu = perf::FindGpu(o.gpu);
  if (!gpu.ok()) return gpu.status();
  absl::StatusOr<perf::ModelSpec> model = perf::FindModel(o.model);
  if (!model.ok()) return model.status();
  absl::StatusOr<perf::StepModel> step = perf::StepModel::Create(*gpu, *model, o.layout, {});
  if (!step.ok()) return step.status();
  if (o.speed <= 0) return absl::InvalidArgumentError(fmt::format("speed must be > 0, got {}", o.speed));
  if (o.block_size < 1 || o.max_num_seqs < 1 || o.max_batched_tokens < 1) {
    return absl::InvalidArgumentError("block_size, max_num_seqs and max_batched_tokens must be >= 1");
  }
  int64_t blocks = o.kv_blocks > 0 ? o.kv_blocks : step->KvCapacityTokens() / o.block_size;
  if (o.slots) {
    const SlotProfile& p = *o.slots;
    if (p.slots < 1 || p.n_ctx < 1 || !(p.similarity >= 0 && p.similarity <= 1) || !(p.prompt_token_ms > 0) ||
        !(p.cached_token_ms >= 0) || !(p.decode_step_ms > 0)) {
      return absl::InvalidArgumentError(
          "slots: need slots >= 1, n_ctx >= 1, similarity in [0, 1], prompt_token_ms > 0, cached_token_ms >= 0, "
          "decode_step_ms > 0");
    }
    if (!o.kv_store.empty()) return absl::InvalidArgumentError("slots: llama-server has no KV store tier");
    // Each slot holds its whole context, so a free slot always has its KV: room for every
    // slot's n_ctx above the planner's 1% watermark.
    blocks = (p.slots * CeilDiv(p.n_ctx, o.block_size)) * 102 / 100 + p.slots;
    o.max_num_seqs = p.slots;
  }
  if (blocks < 1) return absl::InvalidArgumentError("the model leaves no memory for the KV cache");
  std::optional<StoreTierOptions> tier;
  if (!o.kv_store.empty()) {
    tier.emplace();
    tier->master_url = o.kv_store;
    tier->ns = o.kv_store_namespace.empty() ? o.model : o.kv_store_namespace;
    tier->block_bytes = o.kv_block_bytes > 0
                            ? o.kv_block_bytes
                            : static_cast<uint64_t>(step->KvBytesPerToken() * o.block_size);
    tier->queue_blocks = o.kv_offload_queue;
    if (!(o.kv_store_gbps >= 0)) return absl::InvalidArgumentError("kv_store_gbps must be >= 0");
    // The load decision prices the path at the bandwidth OnLoaded draws load times at.
    tier->path.bytes_per_s = o.kv_store_gbps > 0 ? o.kv_store_gbps * 1e9 : step->fabric().nic_bytes_per_s();
    tier->cost = policy::PrefillCost(*step, o.max_batched_tokens);
    tier->block_tokens = o.block_size;
  }
  std::unique_ptr<Engine> engine(new Engine(std::move(o), *std::move(step), blocks));
  if (tier) {
    Engine* e = engine.get();
    auto t = StoreTier::Create(*std::move(tier), [e](std::vector<CacheEvent> ev) { e->PublishFromTier(std::move(ev)); });
    if (!t.ok()) return t.status();
    std::lock_guard l(e->mu_);
    e->tier_ = *std::move(t);
    e->load_bytes_per_s_ = e->tier_->options().path.bytes_per_s;
  }
  return engine;
}

Engine::Engine(EngineOptions options, perf::StepModel model, int64_t kv_blocks)
    : options_(std::move(options)),
      model_(std::move(model)),
      kv_blocks_(kv_blocks),
      planner_({.kv_capacity = kv_blocks,
                .max_running = options_.max_num_seqs,
                .step_tokens = options_.max_batched_tokens}) {
  stats_.kv_blocks = kv_blocks_;
  if (options_.slots) {
    slot_cache_.emplace(options_.slots->slots, options_.slots->similarity);
    slot_stats_.resize(static_cast<size_t>(options_.slots->slots));
  }
  thread_ = std::thread([this] { Loop(); });
}

Engine::~Engine() {
  {
    std::lock_guard l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
  tier_.reset();  // its threads may still call back into this engine until joined
  std::vector<std::shared_ptr<Req>> left;
  for (auto& [id, r] : by_id_) left.push_back(r);
  for (auto& r : left) {
    if (r->in.on_finish) r->in.on_finish("abort", Usage{});
  }
}

uint64_t Engine::Submit(GenRequest request) {
  auto r = std::make_shared<Req>();
  r->in = std::move(request);
  r->in.max_tokens = std::max(1, r->in.max_tokens);
  r->prompt_hash = PromptHash(r->in.prompt);  // outside the engine's lock: a pass over the prompt
  const size_t bs = static_cast<size_t>(options_.block_size);
  uint64_t parent = kRootBlockKey;
  const uint64_t salt = ExtraKeyOf(r->in.cache_salt);
  for (size_t i = 0; i + bs <= r->in.prompt.size(); i += bs) {
    parent = HashTokenBlock(parent, std::span(r->in.prompt).subspan(i, bs), i == 0 ? kEngineSalt ^ salt : kEngineSalt);
    r->hashes.push_back(parent);
  }
  LoadAsk lookup;  // blocks past the HBM prefix, for the store tier
  size_t have = 0;
  uint64_t id = 0;
  {
    std::lock_guard l(mu_);
    r->id = next_id_++;
    id = r->id;
    r->serial = r->id;
    r->target = static_cast<int64_t>(r->in.prompt.size());
    r->remote = r->in.remote_prefill;
    by_id_[r->id] = r;
    if (tier_ && !r->remote) {
      // Past the HBM prefix, HBM may still hold some blocks (eviction is not in chain order):
      // the store is asked for the others, which are the ones it can have.
      const size_t most = CacheableBlocks(*r);
      have = cache_.Count(std::span(r->hashes).first(most));
      for (size_t i = have; i < most; ++i) {
        if (cache_.Count(std::span(r->hashes).subspan(i, 1)) == 0) lookup.keys.push_back(r->hashes[i]);
      }
      r->asked = lookup.keys;
      lookup.hbm_blocks = static_cast<int64_t>(have);
      lookup.input_tokens = r->target;
    }
    if (lookup.keys.empty()) {
      (r->remote ? decode_wait_ : prefill_).push_back(r);
      WorkArrived(Clock::now());
    } else {
      ++loading_;
    }
  }
  if (!lookup.keys.empty()) {
    const auto start = Clock::now();
    // tier_ lives until the engine thread has stopped, and so does this request's slot.
    tier_->Load(std::move(lookup), [this, r, start](LoadResult res) { OnLoaded(r, res, start); });
  }
  cv_.notify_all();
  return id;
}

size_t Engine::CacheableBlocks(const Req& r) const {
  return static_cast<size_t>(std::min<int64_t>(static_cast<int64_t>(r.hashes.size()), (r.target - 1) / options_.block_size));
}

// The loaded blocks arrive at the data path's speed: the measured time of the reads, or at
// least their bytes over the configured bandwidth, in emulated time.
void Engine::OnLoaded(const ReqPtr& r, const LoadResult& res, Clock::time_point start) {
  {
    std::lock_guard l(mu_);
    --loading_;
    if (r->done) return;  // cancelled meanwhile
    r->loaded.assign(r->asked.begin(), r->asked.begin() + static_cast<std::ptrdiff_t>(res.blocks));
    r->asked.clear();
    r->ready_at = start;
    if (res.blocks > 0) {
      const double seconds =
          std::max(static_cast<double>(res.wall) / 1e9, static_cast<double>(res.bytes) / load_bytes_per_s_);
      r->ready_at += std::chrono::nanoseconds(static_cast<int64_t>(seconds * slowdown_ / options_.speed * 1e9));
    }
    loaded_.push_back(r);
    WorkArrived(std::min(Clock::now(), r->ready_at));
  }
  cv_.notify_all();
}

void Engine::WorkArrived(Clock::time_point at) {
  if (!idle_) return;
  idle_ = false;
  work_at_ = at;  // an idle engine starts its step as its work arrives
}

void Engine::PublishFromTier(std::vector<CacheEvent> events) {
  std::function<void(std::vector<CacheEvent>)> sink;
  {
    std::lock_guard l(mu_);
    sink = sink_;
  }
  if (sink) sink(std::move(events));
}

void Engine::Cancel(uint64_t id) {
  std::shared_ptr<Req> r;
  Usage usage;
  {
    std::lock_guard l(mu_);
    auto it = by_id_.find(id);
    if (it == by_id_.end()) return;
    r = it->second;
    by_id_.erase(it);
    r->done = true;
    ReleaseSlot(*r);
    if (r->admitted) Release(*r);
    Unlink(r);
    stats_.finished_abort++;
    usage = Usage{static_cast<int64_t>(r->in.prompt.size()), r->generated, r->cached, r->store_cached,
                  r->prompt_ms, r->decode_ms, r->slot};
  }
  if (r->in.on_finish) r->in.on_finish("abort", usage);
}

double Engine::slowdown() const {
  std::lock_guard l(mu_);
  return slowdown_;
}

void Engine::SetSlowdown(double factor) {
  std::lock_guard l(mu_);
  slowdown_ = std::max(1e-3, factor);
}

void Engine::SetHung(bool hung) {
  {
    std::lock_guard l(mu_);
    hung_ = hung;
  }
  cv_.notify_all();
}

void Engine::ClearCache() {
  std::function<void(std::vector<CacheEvent>)> sink;
  {
    std::lock_guard l(mu_);
    if (slot_cache_) {
      // llama-server publishes no events; its idle slots forget their prompts.
      slot_cache_->ClearIdle();
      for (size_t i = 0; i < slot_stats_.size(); ++i) {
        if (!slot_cache_->processing(static_cast<int>(i))) slot_stats_[i].tokens = 0;
      }
      return;
    }
    // Admitted requests keep their reserved blocks; only the cached copies go.
    cache_.Clear();
    meta_.clear();
    sink = sink_;
  }
  if (sink) sink({CacheEvent{CacheEvent::Kind::kCleared, {}, std::nullopt, {}, {}}});
}

void Engine::set_event_sink(std::function<void(std::vector<CacheEvent>)> sink) {
  std::lock_guard l(mu_);
  sink_ = std::move(sink);
}

void Engine::set_step_observer(std::function<void(const perf::BatchShape&)> observer) {
  std::lock_guard l(mu_);
  step_observer_ = std::move(observer);
}

EngineStats Engine::stats() const {
  std::lock_guard l(mu_);
  EngineStats s = stats_;
  // As vLLM counts: a request holding KV runs (prefilling or decoding), any other waits.
  int admitted = static_cast<int>(running_.size());
  for (const auto& r : prefill_) admitted += r->admitted ? 1 : 0;
  for (const auto& r : decode_wait_) admitted += r->admitted ? 1 : 0;
  s.running = admitted;
  s.waiting = static_cast<int>(prefill_.size() + decode_wait_.size() + running_.size() + loaded_.size()) +
              loading_ - admitted;
  if (tier_) {
    s.store_enabled = true;
    s.store = tier_->stats();
  }
  s.kv_usage = static_cast<double>(HeldBlocks()) / static_cast<double>(kv_blocks_);
  s.slots = slot_stats_;
  return s;
}

void Engine::ShrinkCache(std::vector<CacheEvent>* events) {
  cache_.Shrink(CacheCapacity(), &evicted_);
  PublishRemoved(events);
}

void Engine::PublishRemoved(std::vector<CacheEvent>* events) {
  if (evicted_.empty()) return;
  if (tier_) {
    // HBM evictions go down to the store tier, as vLLM's offloading connectors take them.
    std::vector<OffloadBlock> down;
    down.reserve(evicted_.size());
    for (uint64_t h : evicted_) {
      auto it = meta_.find(h);
      if (it == meta_.end()) continue;
      down.push_back(OffloadBlock{h, it->second.parent, std::move(it->second.tokens), std::move(it->second.salt)});
      meta_.erase(it);
    }
    tier_->Offload(std::move(down));
  }
  if (events->empty() || events->back().kind != CacheEvent::Kind::kRemoved) {
    events->push_back(CacheEvent{CacheEvent::Kind::kRemoved, {}, std::nullopt, {}, {}});
  }
  events->back().hashes.insert(events->back().hashes.end(), evicted_.begin(), evicted_.end());
  evicted_.clear();
}

int64_t Engine::GrowthBlocks(const Req& r) const {
  return std::max<int64_t>(CeilDiv(r.kv_tokens + 1, options_.block_size) - r.private_blocks, 0);
}

int64_t Engine::EnsureGrowthRoom(Clock::time_point now) {
  while (true) {
    int64_t growth = 0;
    for (const auto& r : running_) growth += r->ready_at <= now ? GrowthBlocks(*r) : 0;
    if (!planner_.MustPreempt({HeldBlocks(), growth})) return growth;
    // One class: the emulator does not read vLLM's request priority yet (its fill victim
    // livelocked in EngineTest; docs/elasticity.md), so the victim is the last admitted.
    const std::optional<size_t> victim = policy::BatchPlanner::Victim(
        running_.size(), [](size_t) { return true; }, [](size_t) { return int64_t{0}; }, 0);
    if (!victim) return growth;
    Preempt(running_[*victim]);
  }
}

// vLLM's recompute preemption: the KV is dropped and the prompt with the output so far is
// computed again when the request's turn comes; it waits first in line.
void Engine::Preempt(const ReqPtr& r) {
  Release(*r);
  std::erase(running_, r);
  r->decoding = false;
  r->admitted = false;
  r->remote = false;  // the received KV is gone too
  r->target = static_cast<int64_t>(r->in.prompt.size()) + r->generated;
  r->prefilled = 0;
  r->kv_tokens = 0;
  stats_.preemptions++;
  prefill_.push_front(r);
}

void Engine::Reserve(Req& r, int64_t need, std::vector<CacheEvent>* events) {
  r.private_blocks = need;
  used_blocks_ += need;
  ShrinkCache(events);
  r.admitted = true;
}

// The context's blocks are reserved, not max_tokens: decode growth is found block by block
// and preemption makes room when it runs out. As in a simulated unit, the whole context is
// reserved: the prefix cache lives in free KV, so a hit saves compute, not room.
bool Engine::AdmitPrefill(Req& r, int64_t growth, std::vector<CacheEvent>* events) {
  if (r.admitted) return true;
  const int64_t bs = options_.block_size;
  const int64_t need = CeilDiv(r.target, bs);
  if (!planner_.Admits({HeldBlocks(), growth}, need)) return false;
  if (slot_cache_) {
    if (!TakeSlot(r)) return false;
    Reserve(r, need, events);
    return true;
  }
  const size_t most = CacheableBlocks(r);
  // Matched before the reservation shrinks the cache, as a unit does: the hit blocks are
  // marked used, so the shrink takes others first.
  const int64_t hbm = static_cast<int64_t>(cache_.MatchAndTouch(std::span(r.hashes).first(most)));
  // The prefix goes on through blocks read from the store and blocks HBM holds past a gap;
  // it stops at the first block in neither (one HBM lost since the lookup included).
  int64_t hit = hbm, from_store = 0;
  if (!r.loaded.empty()) {
    const absl::flat_hash_set<uint64_t> loaded(r.loaded.begin(), r.loaded.end());
    for (; hit < static_cast<int64_t>(most); ++hit) {
      if (loaded.contains(r.hashes[static_cast<size_t>(hit)])) {
        ++from_store;
      } else if (cache_.MatchAndTouch(std::span(r.hashes).subspan(static_cast<size_t>(hit), 1)) == 0) {
        break;
      }
    }
    r.loaded.clear();
  }
  Reserve(r, need, events);
  r.prefilled = hit * bs;
  if (!r.seen) {
    r.seen = true;
    r.cached = hit * bs;
    r.store_cached = from_store * bs;
    stats_.prefix_queries += r.in.prompt.size();
    stats_.prefix_hits += static_cast<uint64_t>((hit - from_store) * bs);
    if (tier_) {
      stats_.external_queries += r.in.prompt.size() - static_cast<uint64_t>((hit - from_store) * bs);
      stats_.external_hits += static_cast<uint64_t>(r.store_cached);
    }
  }
  return true;
}

bool Engine::TakeSlot(Req& r) {
  if (r.slot < 0) {
    const std::optional<int> slot = slot_cache_->Pick(r.in.prompt);
    if (!slot) return false;  // deferred until a slot is released
    r.slot = *slot;
  }
  const int64_t hit = std::min(slot_cache_->Start(r.slot, r.in.prompt), r.target - 1);
  r.prefilled = hit;
  step_cached_ += hit;
  const int64_t prompt = static_cast<int64_t>(r.in.prompt.size());
  if (!r.seen) {
    r.seen = true;
    r.cached = hit;
    stats_.prefix_queries += static_cast<uint64_t>(prompt);
    stats_.prefix_hits += static_cast<uint64_t>(hit);
  }
  slot_stats_[static_cast<size_t>(r.slot)] =
      EngineStats::Slot{true, r.id, prompt, prompt - hit, hit, 0, static_cast<int64_t>(r.in.max_tokens)};
  return true;
}

// The slot keeps what it computed: the prompt (as far as it got) and, once that was whole, the
// output so far, as llama-server's slot keeps its sequence's KV.
void Engine::ReleaseSlot(Req& r) {
  if (!slot_cache_ || r.slot < 0 || !slot_cache_->processing(r.slot)) return;
  const size_t prompt = r.in.prompt.size();
  const size_t kept = static_cast<size_t>(std::clamp<int64_t>(r.prefilled, 0, static_cast<int64_t>(prompt)));
  std::vector<uint32_t> tokens(r.in.prompt.begin(), r.in.prompt.begin() + static_cast<std::ptrdiff_t>(kept));
  if (kept == prompt) tokens.insert(tokens.end(), r.out.begin(), r.out.end());
  EngineStats::Slot& s = slot_stats_[static_cast<size_t>(r.slot)];
  s.processing = false;
  s.tokens = static_cast<int64_t>(tokens.size());
  s.decoded = r.generated;
  slot_cache_->Release(r.slot, std::move(tokens), Clock::now().time_since_epoch().count());
}

double Engine::SlotStepSeconds(const perf::BatchShape& shape) const {
  const SlotProfile& p = *options_.slots;
  const double ms = static_cast<double>(shape.prefill_tokens) * p.prompt_token_ms +
                    static_cast<double>(step_cached_) * p.cached_token_ms + (shape.decode_seqs > 0 ? p.decode_step_ms : 0);
  return ms / 1e3;
}

void Engine::AdmitDecodes(Clock::time_point now, std::vector<CacheEvent>* events) {
  while (!decode_wait_.empty() && planner_.HasSeat(static_cast<int64_t>(running_.size()))) {
    const ReqPtr r = decode_wait_.front();
    if (!r->admitted) {
      // A P/D context: its KV is received, not computed, so nothing is shared with the cache.
      int64_t growth = 0;
      for (const auto& o : running_) growth += o->ready_at <= now ? GrowthBlocks(*o) : 0;
      const int64_t need = CeilDiv(static_cast<int64_t>(r->in.prompt.size()), options_.block_size);
      if (!planner_.Admits({HeldBlocks(), growth}, need)) break;
      Reserve(*r, need, events);
      r->prefilled = r->target;
      r->kv_tokens = r->target;
      if (!r->seen) {
        r->seen = true;
        r->cached = r->target;
        stats_.prefix_queries += r->in.prompt.size();
      }
      // The transfer of the prompt's KV from the prefill engine over one NIC.
      const double bytes = model_.KvBytesPerToken() * static_cast<double>(r->in.prompt.size());
      const double seconds = 50e-6 + bytes / (model_.fabric().nic_bytes_per_s() * 0.8);
      r->ready_at = now + std::chrono::nanoseconds(static_cast<int64_t>(seconds * slowdown_ / options_.speed * 1e9));
    }
    decode_wait_.pop_front();
    JoinDecode(r);
  }
}

void Engine::JoinDecode(const ReqPtr& r) {
  r->decoding = true;
  running_.push_back(r);
}

void Engine::Unlink(const ReqPtr& r) {
  std::erase(loaded_, r);
  std::erase(running_, r);
  std::erase(prefill_, r);
  std::erase(decode_wait_, r);
}

void Engine::Release(Req& r) {
  used_blocks_ -= r.private_blocks;
  r.private_blocks = 0;
  r.admitted = false;
}

// The prompt's blocks are computed (or received): they enter the prefix cache, in the free
// KV. One Stored event from the first block the cache did not hold, naming the block before
// it as parent; then the blocks it evicted to make room (after, so that a block stored and
// evicted at once ends up removed).
void Engine::CacheComputedBlocks(Req& r, std::vector<CacheEvent>* events) {
  if (slot_cache_) return;  // the slot holds them, and nothing is published
  const int64_t bs = options_.block_size;
  const size_t first_new = cache_.Insert(r.hashes, CacheCapacity(), &evicted_);
  if (first_new < r.hashes.size()) {
    CacheEvent ev{CacheEvent::Kind::kStored, {}, std::nullopt, {}, {}};
    if (first_new > 0) ev.parent = r.hashes[first_new - 1];
    if (first_new == 0) ev.salt = r.in.cache_salt;
    ev.hashes.assign(r.hashes.begin() + static_cast<std::ptrdiff_t>(first_new), r.hashes.end());
    ev.tokens.assign(r.in.prompt.begin() + static_cast<std::ptrdiff_t>(first_new) * bs,
                     r.in.prompt.begin() + static_cast<std::ptrdiff_t>(r.hashes.size()) * bs);
    events->push_back(std::move(ev));
  }
  if (tier_) {
    for (size_t i = first_new; i < r.hashes.size(); ++i) {
      BlockMeta& m = meta_[r.hashes[i]];
      m.parent = i > 0 ? std::optional<uint64_t>(r.hashes[i - 1]) : std::nullopt;
      m.tokens.assign(r.in.prompt.begin() + static_cast<std::ptrdiff_t>(i) * bs,
                      r.in.prompt.begin() + static_cast<std::ptrdiff_t>(i + 1) * bs);
      m.salt = i == 0 ? r.in.cache_salt : std::string();
    }
  }
  PublishRemoved(events);
}

perf::BatchShape Engine::PlanStep(Plan* plan, std::vector<CacheEvent>* events, Clock::time_point* next_ready) {
  const auto now = Clock::now();
  *next_ready = Clock::time_point::max();
  step_cached_ = 0;
  // Requests whose blocks have arrived from the store tier join the prompts to compute.
  for (auto it = loaded_.begin(); it != loaded_.end();) {
    if ((*it)->ready_at <= now) {
      prefill_.push_back(*it);
      it = loaded_.erase(it);
    } else {
      *next_ready = std::min(*next_ready, (*it)->ready_at);
      ++it;
    }
  }
  AdmitDecodes(now, events);
  const int64_t growth = EnsureGrowthRoom(now);
  plan->clear();
  int64_t decode_seqs = 0, decode_context = 0;
  for (const auto& r : running_) {
    if (r->ready_at > now) {
      *next_ready = std::min(*next_ready, r->ready_at);
      continue;
    }
    ++decode_seqs;
    decode_context += r->kv_tokens;
    plan->emplace_back(r, 0);
  }
  policy::BatchPlanner::Step step = planner_.StartStep(decode_seqs, decode_context);
  step.FillPrefills(
      prefill_.size(), [&](size_t i) { return AdmitPrefill(*prefill_[i], growth, events); },
      [&](size_t i) { return std::pair<int64_t, int64_t>(prefill_[i]->prefilled, prefill_[i]->target); },
      [&](size_t i, int64_t chunk) {
        if (chunk > 0) plan->emplace_back(prefill_[i], chunk);
      });
  return step.shape();
}

void Engine::FinishStep(const Plan& plan, std::vector<CacheEvent>* events,
                        std::vector<std::function<void()>>* calls) {
  stats_.steps++;
  int64_t step_tokens = 0;
  for (const auto& [r, chunk] : plan) step_tokens += r->done ? 0 : std::max<int64_t>(chunk, 1);
  if (step_tokens > 0) {
    const auto& bounds = EngineStats::kIterationTokenBounds;
    const auto bucket = std::lower_bound(bounds.begin(), bounds.end(), static_cast<double>(step_tokens)) - bounds.begin();
    stats_.iteration_tokens[static_cast<size_t>(bucket)]++;
    stats_.iteration_tokens_sum += static_cast<uint64_t>(step_tokens);
  }
  for (const auto& [r, chunk] : plan) {
    if (r->done) continue;  // cancelled meanwhile
    (chunk > 0 ? r->prompt_ms : r->decode_ms) += step_ms_;
    if (chunk > 0) {
      r->prefilled += chunk;
      stats_.prompt_tokens += static_cast<uint64_t>(chunk);
      if (r->prefilled < r->target) continue;
      CacheComputedBlocks(*r, events);
      r->kv_tokens = r->target;
      std::erase(prefill_, r);
    } else {
      if (r->remote && r->generated == 0) CacheComputedBlocks(*r, events);  // the received prompt
      ++r->kv_tokens;
      const int64_t grow = CeilDiv(r->kv_tokens, options_.block_size) - r->private_blocks;
      if (grow > 0) {
        r->private_blocks += grow;
        used_blocks_ += grow;
        ShrinkCache(events);
      }
    }
    // A finished prefill yields a token (the first, or the next after a preemption); so does
    // each decode step.
    const int index = r->generated++;
    stats_.generation_tokens++;
    const uint32_t token = static_cast<uint32_t>(
        Mix64(options_.seed ^ r->prompt_hash ^ static_cast<uint64_t>(index)) % 32000);
    if (slot_cache_) {
      r->out.push_back(token);
      slot_stats_[static_cast<size_t>(r->slot)].decoded = r->generated;
    }
    if (r->in.on_token) calls->push_back([r, index, token] { r->in.on_token(index, token); });
    if (r->generated >= r->in.max_tokens) {
      r->done = true;
      ReleaseSlot(*r);
      Release(*r);
      Unlink(r);
      by_id_.erase(r->id);
      stats_.finished_length++;
      Usage u{static_cast<int64_t>(r->in.prompt.size()), r->generated, r->cached, r->store_cached,
              r->prompt_ms, r->decode_ms, r->slot};
      if (r->in.on_finish) calls->push_back([r, u] { r->in.on_finish("length", u); });
      continue;
    }
    if (chunk == 0) continue;
    if (planner_.HasSeat(static_cast<int64_t>(running_.size()))) {
      JoinDecode(r);
    } else {
      decode_wait_.push_front(r);  // keeps its KV; first to take a seat
    }
  }
}

void Engine::Loop() {
  // Lag of the timeline behind real time that is made up: a step may start up to this much
  // before the thread plans it. More (a hung or starved engine) is not caught up at once.
  constexpr Clock::duration kMaxCatchUp = std::chrono::milliseconds(5);
  std::unique_lock l(mu_);
  Plan plan;
  Clock::time_point next_start{};  // the timeline: when the next step may start
  while (!stop_) {
    if (hung_) {
      cv_.wait(l);
      continue;
    }
    std::vector<CacheEvent> events;
    Clock::time_point next_ready;
    const perf::BatchShape shape = PlanStep(&plan, &events, &next_ready);
    if (!events.empty() && sink_) {
      auto sink = sink_;
      l.unlock();
      sink(std::move(events));
      l.lock();
      continue;
    }
    if (plan.empty()) {
      idle_ = true;
      work_at_ = Clock::time_point{};
      if (next_ready != Clock::time_point::max()) {
        cv_.wait_until(l, next_ready);
        // A KV transfer that landed: its step starts then, unless a request came first.
        if (idle_) work_at_ = std::min(Clock::now(), next_ready);
      } else {
        cv_.wait(l);
      }
      idle_ = false;
      next_start = std::max(next_start, work_at_);
      continue;
    }
    if (step_observer_) step_observer_(shape);
    const double seconds = slot_cache_ ? SlotStepSeconds(shape) : static_cast<double>(model_.StepTime(shape)) / 1e9;
    step_ms_ = seconds * slowdown_ * 1e3;
    const auto dt = std::chrono::nanoseconds(
        static_cast<int64_t>(seconds * slowdown_ / options_.speed * 1e9));
    const auto now = Clock::now();
    const auto start = std::clamp(next_start, now - kMaxCatchUp, now);
    const auto until = start + dt;
    next_start = until;
    cv_.wait_until(l, until, [&] { return stop_; });
    if (stop_) break;
    if (hung_) {
      while (hung_ && !stop_) cv_.wait(l);  // hung mid-step: the step never completes
      next_start = Clock::now();
    }
    if (stop_) break;

    std::vector<std::function<void()>> calls;
    std::vector<CacheEvent> done_events;
    FinishStep(plan, &done_events, &calls);
    plan.clear();
    auto sink = sink_;
    l.unlock();
    if (sink && !done_events.empty()) sink(std::move(done_events));
    for (auto& c : calls) c();
    l.lock();
  }
}

}  // namespace myriad::emu
