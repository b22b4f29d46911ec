#pragma once
// The emulated engine: a vLLM-style continuous-batching scheduler that runs in real time (scaled
// by `speed`), with step times from perf::StepModel, a prefix cache of 16-token blocks
// (policy::PrefixCache, a simulated unit's cache: CLOCK eviction, capacity the KV blocks no
// running request holds), and the KV cache events vLLM would publish. No GPU: tokens are made up, the timing
// and the cache behaviour are what a router sees of a real engine. Its scheduling decisions
// (KV admission, each step's batch, preemption) are policy::BatchPlanner's, the ones the
// simulator's units make; this class keeps the queues, the cache and the clock. As in a unit,
// an admitted request reserves its whole context: a prefix hit saves compute, not room.
#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string_view>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "core/time.h"
#include "emu/cache_event.h"
#include "emu/kv_store_tier.h"
#include "perf/step_model.h"
#include "policy/batch_planner.h"
#include "policy/prefix_cache.h"
#include "policy/slot_cache.h"

namespace myriad::emu {

// An engine like llama.cpp's llama-server (`myriad emu --profile llama-server`): a few slots,
// each caching only the last sequence it processed (policy::SlotCache), no KV events, and
// step times from CPU-like per-token costs instead of the GPU step model.
struct SlotProfile {
  int slots = 2;             // llama-server's --parallel
  // Its --slot-prompt-similarity (0.1 since 2025, common/common.h; 0.5 before), the gateway's
  // assumption too (policy::EngineCacheModelOptions); 0: least recently used only.
  double similarity = 0.1;
  int64_t n_ctx = 4096;      // context per slot
  double prompt_token_ms = 0.75;    // a prompt token computed (about 1.5 s for 2,000)
  double cached_token_ms = 0.0125;  // a prompt token found in the slot (about 25 ms for 2,000)
  double decode_step_ms = 20;       // a step that decodes, for all its slots at once
};

struct EngineOptions {
  std::string model = "Llama-3.1-8B";
  std::string gpu = "H100";
  perf::UnitLayout layout;
  // Emulated seconds per real second: 10 runs ten times faster than the hardware would.
  double speed = 1.0;
  int max_num_seqs = 256;
  int64_t max_batched_tokens = 8192;
  int block_size = 16;
  int64_t kv_blocks = 0;  // 0: what the step model says fits in HBM
  uint64_t seed = 1;
  // The KV store as a second tier (emu/kv_store_tier.h): the master's URL; empty: off.
  std::string kv_store;
  std::string kv_store_namespace;  // empty: the model's name
  // Bytes stored per block, 8 .. kMaxKvBlockBytes; 0: the model's KV per token x block_size.
  uint64_t kv_block_bytes = 0;
  // A load takes at least its bytes over this (GB/s), and the store-load decision prices the
  // path by it; 0: the NIC's line rate, as a P/D transfer.
  double kv_store_gbps = 0;
  size_t kv_offload_queue = 4096;  // blocks waiting to be offloaded, at most
  std::optional<SlotProfile> slots;  // set: llama-server's slots instead of vLLM's cache
};

struct Usage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  // Prompt tokens not computed: found in the prefix cache or loaded from the store tier (as
  // vLLM counts a connector's tokens), or received by P/D.
  int64_t cached_tokens = 0;
  int64_t store_cached_tokens = 0;  // of which loaded from the store tier
  // Emulated time the request's steps took: prefilling its prompt, and decoding (llama-server's
  // timings.prompt_ms and predicted_ms).
  double prompt_ms = 0, predicted_ms = 0;
  int slot = -1;  // the llama-server slot that served it
};

struct GenRequest {
  std::vector<uint32_t> prompt;
  int max_tokens = 16;
  // P/D: the prompt's KV arrives from a prefill engine; the engine waits for the transfer
  // instead of computing it.
  bool remote_prefill = false;
  // vLLM's cache_salt: seeds the first block's hash, so only equally salted prompts share KV.
  std::string cache_salt;
  // Called from the engine thread, outside its lock: each output token, then once at the end
  // with "length" or "abort".
  std::function<void(int index, uint32_t token)> on_token;
  std::function<void(std::string_view finish_reason, const Usage& usage)> on_finish;
};

struct EngineStats {
  int running = 0;
  int waiting = 0;
  double kv_usage = 0;  // 0..1, blocks held by running requests
  int64_t kv_blocks = 0;
  uint64_t prompt_tokens = 0, generation_tokens = 0;
  uint64_t prefix_queries = 0, prefix_hits = 0;  // tokens, in HBM
  // The store tier (vLLM's external prefix cache): prompt tokens past the HBM prefix, and
  // those loaded from the store.
  bool store_enabled = false;
  uint64_t external_queries = 0, external_hits = 0;
  StoreTierStats store;
  uint64_t finished_length = 0, finished_abort = 0;
  uint64_t steps = 0;
  // The llama-server profile's slots, as its GET /slots reports them.
  struct Slot {
    bool processing = false;
    uint64_t task = 0;           // the last request it took (0: none yet)
    int64_t tokens = 0;          // tokens its cache holds
    int64_t prompt_processed = 0, prompt_cached = 0, decoded = 0;  // of that request
    int64_t max_tokens = -1;     // that request's limit (llama-server's n_predict; -1: none)
  };
  std::vector<Slot> slots;
  uint64_t preemptions = 0;  // running sequences sent back to waiting when KV ran out
  // Tokens per engine step (prompt chunks plus one per decoded sequence), bucketed by
  // kIterationTokenBounds as vLLM's vllm:iteration_tokens_total is: per-bucket counts, the
  // last one over the largest bound.
  static constexpr std::array<double, 13> kIterationTokenBounds = {1,   8,    16,   32,   64,   128,  256,
                                                                   512, 1024, 2048, 4096, 8192, 16384};
  std::array<uint64_t, kIterationTokenBounds.size() + 1> iteration_tokens{};
  uint64_t iteration_tokens_sum = 0;
};

class Engine {
 public:
  static absl::StatusOr<std::unique_ptr<Engine>> Create(EngineOptions options);
  ~Engine();  // stops the engine thread; unfinished requests get "abort"

  // Returns an id for Cancel.
  uint64_t Submit(GenRequest request);
  void Cancel(uint64_t id);

  // Faults: steps take `factor` times longer; a hung engine makes no progress at all.
  void SetSlowdown(double factor);
  double slowdown() const;
  void SetHung(bool hung);
  // Drops the whole prefix cache (an AllBlocksCleared event).
  void ClearCache();

  void set_event_sink(std::function<void(std::vector<CacheEvent>)> sink);
  // Called with every step's batch as it starts, from the engine thread under its lock (it must
  // not call the engine): what the planner chose, for comparing with the simulator's units.
  void set_step_observer(std::function<void(const perf::BatchShape&)> observer);
  EngineStats stats() const;
  const EngineOptions& options() const { return options_; }
  const perf::StepModel& step_model() const { return model_; }

 private:
  struct Req;

  using Clock = std::chrono::steady_clock;
  using ReqPtr = std::shared_ptr<Req>;
  using Plan = std::vector<std::pair<ReqPtr, int64_t>>;  // (request, prefill chunk or 0: decode)

  // A block in HBM, as the store tier's BlockStored will describe it once it is offloaded.
  struct BlockMeta {
    std::optional<uint64_t> parent;
    std::vector<uint32_t> tokens;
    std::string salt;
  };

  Engine(EngineOptions options, perf::StepModel model, int64_t kv_blocks);
  void Loop();
  // The leading blocks of r's prompt that may come from a cache: at least one token is
  // computed, the last position's logits giving the next token.
  size_t CacheableBlocks(const Req& r) const;
  // The store tier answered r's lookup, begun at `start`.
  void OnLoaded(const ReqPtr& r, const LoadResult& result, Clock::time_point start);
  void PublishFromTier(std::vector<CacheEvent> events);
  // Builds the next step (admitting and preempting as the planner says) into `plan`; returns
  // its shape, and in `next_ready` when the first KV transfer still awaited lands.
  perf::BatchShape PlanStep(Plan* plan, std::vector<CacheEvent>* events, Clock::time_point* next_ready);
  void FinishStep(const Plan& plan, std::vector<CacheEvent>* events, std::vector<std::function<void()>>* calls);
  // Blocks held by admitted requests (their whole contexts).
  int64_t HeldBlocks() const { return used_blocks_; }
  // The prefix cache lives in the blocks no admitted request holds.
  size_t CacheCapacity() const { return static_cast<size_t>(std::max<int64_t>(kv_blocks_ - used_blocks_, 0)); }
  // Evicts cached blocks down to CacheCapacity(), reporting them as removed.
  void ShrinkCache(std::vector<CacheEvent>* events);
  void PublishRemoved(std::vector<CacheEvent>* events);
  int64_t GrowthBlocks(const Req& r) const;  // what its next decode step needs
  int64_t EnsureGrowthRoom(Clock::time_point now);
  // The slot profile: `r` takes the slot its prompt picks, reusing that slot's cache; false
  // while every slot is busy.
  bool TakeSlot(Req& r);
  void ReleaseSlot(Req& r);
  double SlotStepSeconds(const perf::BatchShape& shape) const;
  void AdmitDecodes(Clock::time_point now, std::vector<CacheEvent>* events);
  bool AdmitPrefill(Req& r, int64_t growth, std::vector<CacheEvent>* events);
  void Reserve(Req& r, int64_t need, std::vector<CacheEvent>* events);
  void Preempt(const ReqPtr& r);
  void JoinDecode(const ReqPtr& r);
  void CacheComputedBlocks(Req& r, std::vector<CacheEvent>* events);
  void Unlink(const ReqPtr& r);
  void Release(Req& r);

  EngineOptions options_;
  perf::StepModel model_;
  int64_t kv_blocks_;
  policy::BatchPlanner planner_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  bool hung_ = false;
  double slowdown_ = 1.0;
  // The emulated timeline: when the next step may start. A step starts when the previous one
  // ends, or, on an idle engine, when its work arrived; not when this thread got round to it, so
  // the emulator's own CPU time (planning, events, callbacks, wake-ups) does not add to the step
  // times the model gives (which already include a real engine's overheads). See Loop().
  bool idle_ = false;
  Clock::time_point work_at_{};
  void WorkArrived(Clock::time_point at);  // caller holds mu_
  uint64_t next_id_ = 1;
  std::deque<ReqPtr> prefill_;      // prompts to compute, arrival order; admitted ones lead
  std::deque<ReqPtr> decode_wait_;  // P/D contexts to receive, and computed ones awaiting a seat
  std::deque<ReqPtr> loaded_;       // store lookups answered, the bytes arriving until ready_at
  int loading_ = 0;                 // requests whose store lookup is under way
  std::vector<ReqPtr> running_;     // the decode batch, oldest first (preemption takes the last)
  std::unordered_map<uint64_t, ReqPtr> by_id_;
  policy::PrefixCache cache_;       // engine hashes
  std::vector<BlockKey> evicted_;   // scratch: what the cache last evicted
  std::unique_ptr<StoreTier> tier_;  // null: no store tier
  std::optional<policy::SlotCache> slot_cache_;  // the slot profile's cache, else none
  std::vector<EngineStats::Slot> slot_stats_;
  int64_t step_cached_ = 0;  // the slot profile: prompt tokens found in slots this step
  double step_ms_ = 0;       // the running step's emulated duration
  std::unordered_map<uint64_t, BlockMeta> meta_;  // with a tier: the blocks in HBM
  double load_bytes_per_s_ = 0;
  int64_t used_blocks_ = 0;         // blocks reserved by admitted requests
  EngineStats stats_;
  std::function<void(std::vector<CacheEvent>)> sink_;
  std::function<void(const perf::BatchShape&)> step_observer_;
  std::thread thread_;
};

}  // namespace myriad::emu
