#pragma once
// The emulated engine's second tier: the Myriad KV store (kvstore/store_client.h), used the way
// vLLM uses an offloading connector (LMCache, Mooncake). Blocks that the HBM cache evicts are
// offloaded: one object of `block_bytes` real bytes per block, named by its engine hash, put by
// a thread of this class from a bounded queue, so the engine's step loop never waits on the
// store (a full queue drops the block, counted). A request whose prompt continues past its HBM
// prefix asks which of the following blocks the store holds (one batched existence check) and,
// when loading them beats recomputing them (policy/store_load.h, the decision the simulator's
// store tier takes too), reads them (one batched get), on a second thread; blocks still waiting to be put are taken
// from the queue, as an offloading connector reads its host staging buffer. Whatever fails is
// recomputed by the engine. A store error never fails a request: it is counted, and the tier rests for
// `retry_after` (offloads dropped, lookups answered "none") instead of making every request
// wait for the same timeout.
//
// Events: blocks written are published as vLLM's BlockStored with medium "CPU" (their parent
// and tokens as they were stored in HBM); a block this tier wrote that the store no longer
// holds, or whose read failed, as BlockRemoved with medium "CPU".
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "core/time.h"
#include "emu/cache_event.h"
#include "policy/prefill_cost.h"
#include "policy/tier_pricing.h"

namespace myriad::kvstore {
class StoreClient;
}

namespace myriad::emu {

// The most bytes per block: 256 MiB, above any model's 16-token block (DeepSeek-V3's MLA is
// ~1 MiB, Llama-3.1-405B's ~8 MiB) and far below the store's 4 GiB object limit.
inline constexpr uint64_t kMaxKvBlockBytes = uint64_t{1} << 28;
// The most blocks waiting to be offloaded (the queue holds their descriptions, ~100 bytes
// each; the payloads are made when they are put).
inline constexpr size_t kMaxOffloadQueue = size_t{1} << 20;

struct StoreTierOptions {
  std::string master_url;
  std::string ns;
  uint64_t block_bytes = 0;  // 1 .. kMaxKvBlockBytes
  size_t queue_blocks = 4096;  // offloads waiting, at most
  size_t queue_loads = 1024;   // requests waiting for a lookup, at most
  Nanos timeout = 2 * kSecond;  // one call to the master or a node
  Nanos retry_after = kSecond;
  std::string auth_token;
  // What the load decision prices: the engine's prefill, the path its loads take (the same
  // bandwidth its load times are drawn at) and the tokens of a block.
  policy::PrefillCost cost;
  policy::StorePath path;
  int64_t block_tokens = 16;
};

// A prompt's lookup: `keys`, its blocks after an HBM prefix of `hbm_blocks`, in chain order,
// for a prefill of `input_tokens`.
struct LoadAsk {
  std::vector<uint64_t> keys;
  int64_t hbm_blocks = 0;
  int64_t input_tokens = 0;
};

// A block the HBM cache evicted, with what its CPU BlockStored event needs.
struct OffloadBlock {
  uint64_t hash = 0;
  std::optional<uint64_t> parent;
  std::vector<uint32_t> tokens;
  std::string salt;  // the request's cache_salt on a chain's first block
};

struct LoadResult {
  size_t blocks = 0;  // consecutive blocks, from the first asked for, read from the store
  uint64_t bytes = 0;
  Nanos wall = 0;  // the lookup and the reads, measured
};

struct StoreTierStats {
  uint64_t offloaded_blocks = 0, offloaded_bytes = 0;
  double offload_seconds = 0;
  uint64_t offload_dropped = 0;   // not offered to the store: queue full, or resting
  uint64_t offload_failures = 0;  // blocks whose put failed
  uint64_t lookups = 0;           // requests that asked the store
  uint64_t lookup_dropped = 0;    // requests that did not (queue full, or resting)
  uint64_t queried_blocks = 0;    // blocks asked for
  uint64_t loaded_blocks = 0, loaded_bytes = 0;
  double load_seconds = 0;
  uint64_t load_failures = 0;  // lookups or reads that failed (their blocks recomputed)
  uint64_t declined_loads = 0, declined_blocks = 0;  // held, but recomputing them was cheaper
  uint64_t queued = 0;         // offloads waiting or being put now
};

class StoreTier {
 public:
  using EventSink = std::function<void(std::vector<CacheEvent>)>;
  using LoadDone = std::function<void(LoadResult)>;

  // Checks the options; the store is first called by the threads, so a store that is down at
  // start only makes the first lookups fail.
  static absl::StatusOr<std::unique_ptr<StoreTier>> Create(StoreTierOptions options, EventSink sink);
  ~StoreTier();  // joins the threads; queued offloads are dropped, queued loads answered "none"

  // Never blocks on the store.
  void Offload(std::vector<OffloadBlock> blocks);
  // `done` runs once, on the tier's thread (or on the caller's, with nothing loaded, when the
  // tier cannot take it).
  void Load(LoadAsk ask, LoadDone done);

  StoreTierStats stats() const;
  const StoreTierOptions& options() const { return options_; }

 private:
  struct LoadJob {
    LoadAsk ask;
    LoadDone done;
  };
  StoreTier(StoreTierOptions options, EventSink sink);
  void OffloadLoop();
  void LoadLoop();
  // The thread's client, connected (again) when needed; null while resting or unreachable.
  kvstore::StoreClient* Client(std::unique_ptr<kvstore::StoreClient>& client);
  void Failed(std::unique_ptr<kvstore::StoreClient>& client);
  bool Resting() const;  // under mu_
  bool PutBatch(kvstore::StoreClient& client, std::vector<OffloadBlock>& batch);
  LoadResult Read(kvstore::StoreClient& client, const LoadAsk& request, bool* store_failed);
  std::string Payload(uint64_t hash) const;  // block_bytes, the hash in the first 8

  const StoreTierOptions options_;
  const EventSink sink_;
  std::string pattern_;  // the payloads' common bytes
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::deque<OffloadBlock> offloads_;
  size_t offloading_ = 0;  // taken from offloads_, being put
  std::deque<LoadJob> loads_;
  absl::flat_hash_set<uint64_t> stored_;  // blocks this tier wrote and believes held
  absl::flat_hash_set<uint64_t> staged_;  // blocks in offloads_ or being put
  std::chrono::steady_clock::time_point rest_until_{};
  StoreTierStats stats_;
  std::thread offload_thread_;
  std::thread load_thread_;
};

}  // namespace myriad::emu
