#include "emu/engine.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include "core/block_hash.h"
#include "core/rng.h"

namespace myriad::emu {

namespace {

using Clock = std::chrono::steady_clock;

// The engine's own block hash chain: salted so that it differs from Myriad's BlockKeys, as
// vLLM's sha256-over-pickle hashes do; consumers must map it through the token ids.
constexpr uint64_t kEngineSalt = 0x76'6c'6c'6d'45'6d'75'31ULL;

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

struct Engine::Req {
  uint64_t id = 0;
  GenRequest in;
  std::vector<uint64_t> hashes;  // engine hashes of the prompt's full blocks
  int64_t prefilled = 0;         // prompt tokens computed (or received)
  int64_t cached = 0;
  int generated = 0;
  int held_cached = 0;      // leading blocks referenced in the cache
  int64_t private_blocks = 0;
  bool admitted = false;
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
    : options_(std::move(options)), model_(std::move(model)), kv_blocks_(kv_blocks) {
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
    by_id_[r->id] = r;
    waiting_.push_back(r);
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
    if (r->admitted) {
      Release(*r);
      running_.erase(std::find(running_.begin(), running_.end(), r));
    } else {
      waiting_.erase(std::find(waiting_.begin(), waiting_.end(), r));
    }
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
    for (auto& r : running_) {
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

EngineStats Engine::stats() const {
  std::lock_guard l(mu_);
  EngineStats s = stats_;
  s.running = static_cast<int>(running_.size());
  s.waiting = static_cast<int>(waiting_.size());
  const int64_t in_use = static_cast<int64_t>(cache_.size() - lru_.size()) + used_blocks_;
  s.kv_usage = static_cast<double>(in_use) / static_cast<double>(kv_blocks_);
  return s;
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

// Reserves the request's whole footprint up front (prompt and max_tokens), so that admitted
// requests never need preemption; matched prefix blocks are shared, not reserved again.
bool Engine::Admit(Req& r, std::vector<CacheEvent>* events) {
  const int64_t bs = options_.block_size;
  int hit = 0;
  if (!r.in.remote_prefill) {
    while (hit < static_cast<int>(r.hashes.size()) && cache_.count(r.hashes[hit])) ++hit;
  }
  const int64_t total = CeilDiv(static_cast<int64_t>(r.in.prompt.size()) + r.in.max_tokens, bs);
  const int64_t need = total - hit;
  // Blocks about to be referenced stop being evictable; count what is free without them.
  int64_t hit_unref = 0;
  for (int i = 0; i < hit; ++i) hit_unref += cache_[r.hashes[i]].refs == 0 ? 1 : 0;
  auto free_blocks = [&] {
    return kv_blocks_ - static_cast<int64_t>(cache_.size()) - used_blocks_;
  };
  if (need > kv_blocks_ - used_blocks_ - static_cast<int64_t>(cache_.size() - lru_.size()) -
                 hit_unref) {
    return false;  // would not fit even after evicting every unreferenced block
  }
  for (int i = 0; i < hit; ++i) {
    Block& b = cache_[r.hashes[i]];
    if (b.refs++ == 0) lru_.erase(b.lru);
  }
  while (free_blocks() < need) {
    if (!EvictOne(events)) break;
  }
  r.held_cached = hit;
  r.private_blocks = need;
  used_blocks_ += need;
  r.cached = r.in.remote_prefill ? static_cast<int64_t>(r.in.prompt.size()) : hit * bs;
  r.prefilled = r.cached;
  r.admitted = true;
  stats_.prefix_queries += r.in.prompt.size();
  if (!r.in.remote_prefill) stats_.prefix_hits += static_cast<uint64_t>(hit * bs);
  if (r.in.remote_prefill) {
    // The transfer of the prompt's KV from the prefill engine over one NIC.
    const double bytes = model_.KvBytesPerToken() * static_cast<double>(r.in.prompt.size());
    const double seconds = 50e-6 + bytes / (model_.fabric().nic_bytes_per_s() * 0.8);
    r.ready_at = Clock::now() + std::chrono::nanoseconds(static_cast<int64_t>(
                                    seconds * slowdown_ / options_.speed * 1e9));
  }
  return true;
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
}

void Engine::Loop() {
  std::unique_lock l(mu_);
  while (!stop_) {
    std::vector<CacheEvent> events;
    // Admit in arrival order while there is room.
    while (!hung_ && !waiting_.empty() && static_cast<int>(running_.size()) < options_.max_num_seqs) {
      auto r = waiting_.front();
      if (!Admit(*r, &events)) break;
      waiting_.pop_front();
      running_.push_back(r);
    }
    const auto now = Clock::now();
    std::vector<std::pair<std::shared_ptr<Req>, int64_t>> plan;  // (request, prefill chunk or 0)
    perf::BatchShape shape;
    int64_t budget = options_.max_batched_tokens;
    Clock::time_point next_ready = Clock::time_point::max();
    for (auto& r : running_) {
      if (r->ready_at > now) {
        next_ready = std::min(next_ready, r->ready_at);
        continue;
      }
      const int64_t left = static_cast<int64_t>(r->in.prompt.size()) - r->prefilled;
      if (left <= 0 || r->in.remote_prefill) {
        shape.decode_seqs++;
        shape.decode_context += static_cast<int64_t>(r->in.prompt.size()) + r->generated;
        plan.emplace_back(r, 0);
        budget--;
      }
    }
    for (auto& r : running_) {
      const int64_t left = static_cast<int64_t>(r->in.prompt.size()) - r->prefilled;
      if (left <= 0 || r->in.remote_prefill || budget <= 0) continue;
      const int64_t chunk = std::min(left, budget);
      budget -= chunk;
      shape.prefill_tokens += chunk;
      shape.prefill_seqs++;
      shape.prefill_attended += static_cast<double>(chunk) * (static_cast<double>(r->prefilled) +
                                                              static_cast<double>(chunk) / 2);
      plan.emplace_back(r, chunk);
    }
    if (!events.empty() && sink_) {
      auto sink = sink_;
      l.unlock();
      sink(std::move(events));
      l.lock();
      continue;
    }
    if (hung_ || plan.empty()) {
      if (next_ready != Clock::time_point::max() && !hung_) {
        cv_.wait_until(l, next_ready);
      } else {
        cv_.wait(l);
      }
      continue;
    }
    const double seconds = static_cast<double>(model_.StepTime(shape)) / 1e9;
    const auto dt = std::chrono::nanoseconds(
        static_cast<int64_t>(seconds * slowdown_ / options_.speed * 1e9));
    const auto until = Clock::now() + dt;
    cv_.wait_until(l, until, [&] { return stop_; });
    if (stop_) break;
    while (hung_ && !stop_) cv_.wait(l);  // hung mid-step: the step never completes
    if (stop_) break;

    std::vector<std::function<void()>> calls;
    std::vector<CacheEvent> stored;
    const int64_t bs = options_.block_size;
    stats_.steps++;
    for (auto& [r, chunk] : plan) {
      if (r->done) continue;  // cancelled meanwhile
      if (chunk > 0 || (r->in.remote_prefill && r->generated == 0 && r->held_cached == 0 &&
                        !r->hashes.empty())) {
        r->prefilled += chunk;
        stats_.prompt_tokens += static_cast<uint64_t>(chunk);
        if (r->prefilled < static_cast<int64_t>(r->in.prompt.size())) continue;
        // The prompt's blocks are computed: they enter the prefix cache. One Stored event per
        // run of new blocks, each naming the block before it as parent.
        for (size_t i = static_cast<size_t>(r->held_cached); i < r->hashes.size(); ++i) {
          auto [it, fresh] = cache_.try_emplace(r->hashes[i]);
          if (!fresh && it->second.refs == 0) lru_.erase(it->second.lru);
          it->second.refs++;
          r->private_blocks--;
          used_blocks_--;
          if (!fresh) continue;
          const bool extends = !stored.empty() && i > 0 && !stored.back().hashes.empty() &&
                               stored.back().hashes.back() == r->hashes[i - 1];
          if (!extends) {
            CacheEvent ev{CacheEvent::Kind::kStored, {}, std::nullopt, {}, {}};
            if (i > 0) ev.parent = r->hashes[i - 1];
            if (i == 0) ev.salt = r->in.cache_salt;
            stored.push_back(std::move(ev));
          }
          stored.back().hashes.push_back(r->hashes[i]);
          stored.back().tokens.insert(stored.back().tokens.end(),
                                      r->in.prompt.begin() + static_cast<int64_t>(i) * bs,
                                      r->in.prompt.begin() + static_cast<int64_t>(i + 1) * bs);
        }
        r->held_cached = static_cast<int>(r->hashes.size());
      }
      // A finished prefill yields the first token; a decode step one more.
      const int index = r->generated++;
      stats_.generation_tokens++;
      const uint32_t token = static_cast<uint32_t>(
          Mix64(options_.seed ^ (r->serial << 20) ^ static_cast<uint64_t>(index)) % 32000);
      if (r->in.on_token) calls.push_back([r, index, token] { r->in.on_token(index, token); });
      if (r->generated >= r->in.max_tokens) {
        r->done = true;
        Release(*r);
        running_.erase(std::find(running_.begin(), running_.end(), r));
        by_id_.erase(r->id);
        stats_.finished_length++;
        Usage u{static_cast<int64_t>(r->in.prompt.size()), r->generated, r->cached};
        if (r->in.on_finish) calls.push_back([r, u] { r->in.on_finish("length", u); });
      }
    }
    auto sink = sink_;
    l.unlock();
    if (sink && !stored.empty()) sink(std::move(stored));
    for (auto& c : calls) c();
    l.lock();
  }
}

}  // namespace myriad::emu
