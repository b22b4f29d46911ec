#include "emu/engine.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include "core/block_hash.h"
#include "core/rng.h"

namespace myriad::emu {

namespace {

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
  int generated = 0;
  int held_cached = 0;  // leading blocks referenced in the cache
  int64_t private_blocks = 0;
  bool remote = false;    // its KV arrives by P/D (until a preemption drops it)
  bool admitted = false;  // holds KV
  bool seen = false;      // admitted once: counted in the prefix-cache stats
  bool decoding = false;  // in running_
  bool done = false;
  Clock::time_point ready_at{};  // remote prefill: when the KV transfer completes
  uint64_t serial = 0;
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
  if (blocks < 1) return absl::InvalidArgumentError("the model leaves no memory for the KV cache");
  return std::unique_ptr<Engine>(new Engine(std::move(o), *std::move(step), blocks));
}

Engine::Engine(EngineOptions options, perf::StepModel model, int64_t kv_blocks)
    : options_(std::move(options)),
      model_(std::move(model)),
      kv_blocks_(kv_blocks),
      planner_({.kv_capacity = kv_blocks,
                .max_running = options_.max_num_seqs,
                .step_tokens = options_.max_batched_tokens}) {
  stats_.kv_blocks = kv_blocks_;
  thread_ = std::thread([this] { Loop(); });
}

Engine::~Engine() {
  {
    std::lock_guard l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
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
  const size_t bs = static_cast<size_t>(options_.block_size);
  uint64_t parent = kRootBlockKey;
  const uint64_t salt = ExtraKeyOf(r->in.cache_salt);
  for (size_t i = 0; i + bs <= r->in.prompt.size(); i += bs) {
    parent = HashTokenBlock(parent, std::span(r->in.prompt).subspan(i, bs), i == 0 ? kEngineSalt ^ salt : kEngineSalt);
    r->hashes.push_back(parent);
  }
  {
    std::lock_guard l(mu_);
    r->id = next_id_++;
    r->serial = r->id;
    r->target = static_cast<int64_t>(r->in.prompt.size());
    r->remote = r->in.remote_prefill;
    by_id_[r->id] = r;
    (r->remote ? decode_wait_ : prefill_).push_back(r);
    if (idle_) {
      idle_ = false;
      work_at_ = Clock::now();  // an idle engine starts its step as the request arrives
    }
  }
  cv_.notify_all();
  return r->id;
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
    if (r->admitted) Release(*r);
    Unlink(r);
    stats_.finished_abort++;
    usage = Usage{static_cast<int64_t>(r->in.prompt.size()), r->generated, r->cached};
  }
  if (r->in.on_finish) r->in.on_finish("abort", usage);
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
    // Referenced blocks stay with their requests as private blocks (a block shared by two
    // requests is then counted twice until they finish: conservative).
    for (auto& [id, r] : by_id_) {
      r->private_blocks += r->held_cached;
      used_blocks_ += r->held_cached;
      r->held_cached = 0;
    }
    cache_.clear();
    lru_.clear();
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
  s.waiting = static_cast<int>(prefill_.size() + decode_wait_.size() + running_.size()) - admitted;
  s.kv_usage = static_cast<double>(HeldBlocks()) / static_cast<double>(kv_blocks_);
  return s;
}

int64_t Engine::HeldBlocks() const {
  return static_cast<int64_t>(cache_.size() - lru_.size()) + used_blocks_;
}

bool Engine::EvictOne(std::vector<CacheEvent>* events) {
  if (lru_.empty()) return false;
  const uint64_t h = lru_.front();
  lru_.pop_front();
  cache_.erase(h);
  if (!events->empty() && events->back().kind == CacheEvent::Kind::kRemoved) {
    events->back().hashes.push_back(h);
  } else {
    events->push_back(CacheEvent{CacheEvent::Kind::kRemoved, {h}, std::nullopt, {}, {}});
  }
  return true;
}

int64_t Engine::GrowthBlocks(const Req& r) const {
  const int64_t held = r.held_cached + r.private_blocks;
  return std::max<int64_t>(CeilDiv(r.kv_tokens + 1, options_.block_size) - held, 0);
}

int64_t Engine::EnsureGrowthRoom(Clock::time_point now) {
  while (true) {
    int64_t growth = 0;
    for (const auto& r : running_) growth += r->ready_at <= now ? GrowthBlocks(*r) : 0;
    if (!planner_.MustPreempt({HeldBlocks(), growth})) return growth;
    const std::optional<size_t> victim = policy::BatchPlanner::Victim(running_.size(), [](size_t) { return true; });
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

void Engine::Reserve(Req& r, int hit, int64_t need, std::vector<CacheEvent>* events) {
  for (int i = 0; i < hit; ++i) {
    Block& b = cache_[r.hashes[i]];
    if (b.refs++ == 0) lru_.erase(b.lru);
  }
  r.held_cached = hit;
  r.private_blocks = need;
  used_blocks_ += need;
  while (static_cast<int64_t>(cache_.size()) + used_blocks_ > kv_blocks_) {
    if (!EvictOne(events)) break;
  }
  r.admitted = true;
}

// The context's blocks are reserved, not max_tokens: decode growth is found block by block
// and preemption makes room when it runs out. Matched prefix blocks are shared.
bool Engine::AdmitPrefill(Req& r, int64_t growth, std::vector<CacheEvent>* events) {
  if (r.admitted) return true;
  const int64_t bs = options_.block_size;
  // At least one token is computed: the last position's logits give the next token.
  const int most = static_cast<int>(std::min<int64_t>(static_cast<int64_t>(r.hashes.size()), (r.target - 1) / bs));
  int hit = 0;
  while (hit < most && cache_.count(r.hashes[hit])) ++hit;
  // Blocks about to be referenced stop being evictable: they leave the free pool as the new
  // ones do.
  int64_t hit_unref = 0;
  for (int i = 0; i < hit; ++i) hit_unref += cache_[r.hashes[i]].refs == 0 ? 1 : 0;
  const int64_t need = CeilDiv(r.target, bs) - hit;
  if (!planner_.Admits({HeldBlocks(), growth}, need + hit_unref)) return false;
  Reserve(r, hit, need, events);
  r.prefilled = hit * bs;
  if (!r.seen) {
    r.seen = true;
    r.cached = hit * bs;
    stats_.prefix_queries += r.in.prompt.size();
    stats_.prefix_hits += static_cast<uint64_t>(hit * bs);
  }
  return true;
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
      Reserve(*r, 0, need, events);
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
  std::erase(running_, r);
  std::erase(prefill_, r);
  std::erase(decode_wait_, r);
}

void Engine::Release(Req& r) {
  for (int i = 0; i < r.held_cached; ++i) {
    auto it = cache_.find(r.hashes[i]);
    if (it == cache_.end()) continue;
    if (--it->second.refs == 0) it->second.lru = lru_.insert(lru_.end(), it->first);
  }
  r.held_cached = 0;
  used_blocks_ -= r.private_blocks;
  r.private_blocks = 0;
  r.admitted = false;
}

// The prompt's blocks are computed (or received): they enter the prefix cache. One Stored event
// per run of new blocks, each naming the block before it as parent.
void Engine::CacheComputedBlocks(Req& r, std::vector<CacheEvent>* events) {
  const int64_t bs = options_.block_size;
  for (size_t i = static_cast<size_t>(r.held_cached); i < r.hashes.size(); ++i) {
    auto [it, fresh] = cache_.try_emplace(r.hashes[i]);
    if (!fresh && it->second.refs == 0) lru_.erase(it->second.lru);
    it->second.refs++;
    r.private_blocks--;
    used_blocks_--;
    if (!fresh) continue;
    const bool extends = !events->empty() && i > 0 && events->back().kind == CacheEvent::Kind::kStored &&
                         !events->back().hashes.empty() && events->back().hashes.back() == r.hashes[i - 1];
    if (!extends) {
      CacheEvent ev{CacheEvent::Kind::kStored, {}, std::nullopt, {}, {}};
      if (i > 0) ev.parent = r.hashes[i - 1];
      if (i == 0) ev.salt = r.in.cache_salt;
      events->push_back(std::move(ev));
    }
    events->back().hashes.push_back(r.hashes[i]);
    events->back().tokens.insert(events->back().tokens.end(),
                                 r.in.prompt.begin() + static_cast<int64_t>(i) * bs,
                                 r.in.prompt.begin() + static_cast<int64_t>(i + 1) * bs);
  }
  r.held_cached = static_cast<int>(r.hashes.size());
}

perf::BatchShape Engine::PlanStep(Plan* plan, std::vector<CacheEvent>* events, Clock::time_point* next_ready) {
  const auto now = Clock::now();
  AdmitDecodes(now, events);
  const int64_t growth = EnsureGrowthRoom(now);
  plan->clear();
  *next_ready = Clock::time_point::max();
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
      const int64_t grow = CeilDiv(r->kv_tokens, options_.block_size) - r->held_cached - r->private_blocks;
      if (grow > 0) {
        r->private_blocks += grow;
        used_blocks_ += grow;
        while (static_cast<int64_t>(cache_.size()) + used_blocks_ > kv_blocks_) {
          if (!EvictOne(events)) break;
        }
      }
    }
    // A finished prefill yields a token (the first, or the next after a preemption); so does
    // each decode step.
    const int index = r->generated++;
    stats_.generation_tokens++;
    const uint32_t token = static_cast<uint32_t>(
        Mix64(options_.seed ^ (r->serial << 20) ^ static_cast<uint64_t>(index)) % 32000);
    if (r->in.on_token) calls->push_back([r, index, token] { r->in.on_token(index, token); });
    if (r->generated >= r->in.max_tokens) {
      r->done = true;
      Release(*r);
      Unlink(r);
      by_id_.erase(r->id);
      stats_.finished_length++;
      Usage u{static_cast<int64_t>(r->in.prompt.size()), r->generated, r->cached};
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
    const double seconds = static_cast<double>(model_.StepTime(shape)) / 1e9;
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
