#include "emu/kv_store_tier.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string_view>

#include "kvstore/store_client.h"
#include "net/http.h"
#include "policy/kv_event_order.h"
#include "policy/store_load.h"

namespace myriad::emu {

namespace {

using Clock = std::chrono::steady_clock;

// Puts per call: a batch is one placement round trip and one write per block.
constexpr size_t kPutBatch = 64;

// A put of a block the store holds already (another engine wrote it) is no failure.
bool AlreadyThere(const absl::Status& st) {
  return absl::IsAlreadyExists(st) || absl::IsFailedPrecondition(st);
}

// `blocks` reordered so that a block comes after its parent when both are here: the indexer
// keys a CPU block from its parent, and HBM evicts children before parents as often as not.
template <typename T, typename Hash, typename Parent>
void ParentFirst(std::vector<T>& blocks, Hash hash, Parent parent) {
  std::vector<uint64_t> hashes;
  std::vector<std::optional<uint64_t>> parents;
  hashes.reserve(blocks.size());
  parents.reserve(blocks.size());
  for (const T& b : blocks) {
    hashes.push_back(hash(b));
    parents.push_back(parent(b));
  }
  std::vector<T> ordered;
  ordered.reserve(blocks.size());
  for (size_t i : policy::ParentFirstOrder(hashes, parents)) ordered.push_back(std::move(blocks[i]));
  blocks.swap(ordered);
}

Nanos Since(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t).count();
}

}  // namespace

absl::StatusOr<std::unique_ptr<StoreTier>> StoreTier::Create(StoreTierOptions o, EventSink sink) {
  // The names are EngineOptions' (the CLI's --kv-store, --kv-store-namespace, ...).
  if (o.master_url.empty()) return absl::InvalidArgumentError("kv_store: no master URL");
  for (std::string_view rest = o.master_url; !rest.empty();) {  // a master, or a group's list
    const size_t comma = rest.find(',');
    std::string_view url = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    while (!url.empty() && url.front() == ' ') url.remove_prefix(1);
    while (!url.empty() && url.back() == ' ') url.remove_suffix(1);
    if (url.empty()) continue;
    if (auto hp = net::ParseHttpUrl(url); !hp.ok()) {
      return absl::InvalidArgumentError(fmt::format("kv_store: '{}': {}", url, std::string(hp.status().message())));
    }
  }
  if (o.ns.empty()) return absl::InvalidArgumentError("kv_store_namespace: empty");
  if (o.block_bytes < 8 || o.block_bytes > kMaxKvBlockBytes) {
    return absl::InvalidArgumentError(
        fmt::format("kv_block_bytes: {} is not in [8, {}]", o.block_bytes, kMaxKvBlockBytes));
  }
  if (o.queue_blocks < 1 || o.queue_blocks > kMaxOffloadQueue) {
    return absl::InvalidArgumentError(fmt::format("kv_offload_queue: {} is not in [1, {}]", o.queue_blocks, kMaxOffloadQueue));
  }
  if (o.queue_loads < 1) return absl::InvalidArgumentError("kv store: the load queue must hold >= 1");
  if (o.block_tokens < 1) return absl::InvalidArgumentError("kv store: a block must hold >= 1 token");
  return std::unique_ptr<StoreTier>(new StoreTier(std::move(o), std::move(sink)));
}

StoreTier::StoreTier(StoreTierOptions options, EventSink sink)
    : options_(std::move(options)), sink_(std::move(sink)) {
  pattern_.resize(options_.block_bytes);
  for (size_t i = 0; i < pattern_.size(); ++i) pattern_[i] = static_cast<char>((i * 131 + 7) & 0xff);
  offload_thread_ = std::thread([this] { OffloadLoop(); });
  load_thread_ = std::thread([this] { LoadLoop(); });
}

StoreTier::~StoreTier() {
  {
    std::lock_guard l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  offload_thread_.join();
  load_thread_.join();
  for (LoadJob& job : loads_) job.done(LoadResult{});
}

bool StoreTier::Resting() const { return Clock::now() < rest_until_; }

void StoreTier::Offload(std::vector<OffloadBlock> blocks) {
  // Queued parent-first, so that a sweep's batches of puts land parent-first too.
  ParentFirst(blocks, [](const OffloadBlock& b) { return b.hash; }, [](const OffloadBlock& b) { return b.parent; });
  {
    std::lock_guard l(mu_);
    for (OffloadBlock& b : blocks) {
      if (offloads_.size() >= options_.queue_blocks || Resting()) {
        ++stats_.offload_dropped;
        continue;
      }
      staged_.insert(b.hash);
      offloads_.push_back(std::move(b));
    }
  }
  cv_.notify_all();
}

void StoreTier::Load(LoadAsk ask, LoadDone done) {
  {
    std::lock_guard l(mu_);
    const bool empty = ask.keys.empty();
    if (!empty && loads_.size() < options_.queue_loads && !Resting()) {
      loads_.push_back(LoadJob{std::move(ask), std::move(done)});
      cv_.notify_all();
      return;
    }
    if (!empty) ++stats_.lookup_dropped;
  }
  done(LoadResult{});
}

StoreTierStats StoreTier::stats() const {
  std::lock_guard l(mu_);
  StoreTierStats s = stats_;
  s.queued = offloads_.size() + offloading_;
  return s;
}

std::string StoreTier::Payload(uint64_t hash) const {
  std::string p = pattern_;
  std::memcpy(p.data(), &hash, sizeof(hash));
  return p;
}

kvstore::StoreClient* StoreTier::Client(std::unique_ptr<kvstore::StoreClient>& client) {
  if (client) return client.get();
  kvstore::StoreClientOptions o;
  o.master_timeout = options_.timeout;
  o.node_timeout = options_.timeout;
  o.auth_token = options_.auth_token;
  auto c = kvstore::StoreClient::Connect(options_.master_url, o);
  if (!c.ok()) return nullptr;
  // The namespace may exist already (another engine of the model, or this one restarted).
  const absl::Status st = (*c)->master().CreateNamespace(options_.ns);
  if (!st.ok() && !AlreadyThere(st)) return nullptr;
  client = *std::move(c);
  return client.get();
}

// A failed call: the connection is remade next time, after a rest.
void StoreTier::Failed(std::unique_ptr<kvstore::StoreClient>& client) {
  client.reset();
  std::lock_guard l(mu_);
  rest_until_ = Clock::now() + std::chrono::nanoseconds(options_.retry_after);
}

void StoreTier::OffloadLoop() {
  std::unique_ptr<kvstore::StoreClient> client;
  std::unique_lock l(mu_);
  while (true) {
    cv_.wait(l, [&] { return stop_ || !offloads_.empty(); });
    if (stop_) return;
    std::vector<OffloadBlock> batch;
    while (!offloads_.empty() && batch.size() < kPutBatch) {
      batch.push_back(std::move(offloads_.front()));
      offloads_.pop_front();
    }
    offloading_ = batch.size();
    l.unlock();
    if (kvstore::StoreClient* c = Client(client)) {
      if (!PutBatch(*c, batch)) Failed(client);
    } else {
      Failed(client);
      std::lock_guard g(mu_);
      stats_.offload_failures += batch.size();
    }
    l.lock();
    offloading_ = 0;
    for (const OffloadBlock& b : batch) staged_.erase(b.hash);
  }
}

// False when the store itself failed: no put succeeded and the master or the nodes could not
// be reached.
bool StoreTier::PutBatch(kvstore::StoreClient& client, std::vector<OffloadBlock>& batch) {
  std::vector<std::string> payloads;
  std::vector<kvstore::PutItem> items;
  payloads.reserve(batch.size());
  for (const OffloadBlock& b : batch) payloads.push_back(Payload(b.hash));
  for (size_t i = 0; i < batch.size(); ++i) items.push_back({std::span(&batch[i].hash, 1), payloads[i]});
  const auto start = Clock::now();
  const std::vector<absl::Status> st = client.BatchPut(options_.ns, items);
  const Nanos wall = Since(start);
  std::vector<CacheEvent> events;
  uint64_t stored = 0, failed = 0;
  bool unreachable = false;
  for (size_t i = 0; i < batch.size(); ++i) {
    if (i >= st.size() || (!st[i].ok() && !AlreadyThere(st[i]))) {
      ++failed;
      unreachable |= i >= st.size() || absl::IsUnavailable(st[i]) || absl::IsDeadlineExceeded(st[i]);
      continue;
    }
    if (!st[i].ok()) continue;  // held already, and published by whoever wrote it
    ++stored;
    OffloadBlock& b = batch[i];
    CacheEvent e{CacheEvent::Kind::kStored, {b.hash}, b.parent, std::move(b.tokens), std::move(b.salt)};
    e.medium = CacheEvent::Medium::kCpu;
    events.push_back(std::move(e));
  }
  // A batch may hold a child evicted in one sweep and its parent evicted in a later one.
  ParentFirst(events, [](const CacheEvent& e) { return e.hashes[0]; }, [](const CacheEvent& e) { return e.parent; });
  {
    std::lock_guard l(mu_);
    stats_.offloaded_blocks += stored;
    stats_.offloaded_bytes += stored * options_.block_bytes;
    stats_.offload_seconds += static_cast<double>(wall) / 1e9;
    stats_.offload_failures += failed;
    for (const CacheEvent& e : events) stored_.insert(e.hashes[0]);
  }
  if (!events.empty() && sink_) sink_(std::move(events));
  return !(unreachable && failed == batch.size());
}

void StoreTier::LoadLoop() {
  std::unique_ptr<kvstore::StoreClient> client;
  std::unique_lock l(mu_);
  while (true) {
    cv_.wait(l, [&] { return stop_ || !loads_.empty(); });
    if (stop_) return;
    LoadJob job = std::move(loads_.front());
    loads_.pop_front();
    ++stats_.lookups;
    stats_.queried_blocks += job.ask.keys.size();
    l.unlock();
    LoadResult result;
    if (kvstore::StoreClient* c = Client(client)) {
      bool store_failed = false;
      result = Read(*c, job.ask, &store_failed);
      if (store_failed) Failed(client);
    } else {
      Failed(client);
      std::lock_guard g(mu_);
      ++stats_.load_failures;
    }
    job.done(result);
    l.lock();
  }
}

// The leading run of `keys` that the tier holds, read: blocks still staged for offload (evicted
// from HBM, their put not done yet: the bytes are in this host's memory) and blocks the store
// holds (one existence check, one batched get), when the load decision takes it.
// *store_failed: the store itself failed (the master, or the first block's every replica,
// unreachable), and the tier rests.
LoadResult StoreTier::Read(kvstore::StoreClient& client, const LoadAsk& request, bool* store_failed_out) {
  const std::vector<uint64_t>& keys = request.keys;
  const auto start = Clock::now();
  LoadResult r;
  std::vector<uint64_t> gone;  // written by this tier, no longer in the store
  bool store_failed = false;
  std::vector<bool> staged(keys.size());
  std::vector<uint64_t> ask;  // the keys not staged, in order
  {
    std::lock_guard l(mu_);
    for (size_t i = 0; i < keys.size(); ++i) {
      staged[i] = staged_.contains(keys[i]);
      if (!staged[i]) ask.push_back(keys[i]);
    }
  }
  std::vector<bool> held(ask.size());
  if (!ask.empty()) {
    auto exists = client.master().Exists(options_.ns, ask);
    if (!exists.ok() || exists->size() != ask.size()) {
      store_failed = true;
    } else {
      std::lock_guard l(mu_);
      for (size_t i = 0; i < ask.size(); ++i) {
        held[i] = (*exists)[i];
        if (!held[i] && stored_.erase(ask[i]) > 0) gone.push_back(ask[i]);
      }
    }
  }
  // The run: keys staged or held, in chain order; `from_store` of them are in the store.
  size_t run = 0, from_store = 0;
  for (size_t a = 0; run < keys.size(); ++run) {
    if (staged[run]) continue;
    if (a >= held.size() || !held[a]) break;
    ++a;
    ++from_store;
  }
  const policy::StoreLoad decision = policy::DecideStoreLoad(
      options_.cost, options_.path,
      {.input_tokens = request.input_tokens, .hbm_blocks = request.hbm_blocks, .store_blocks = static_cast<int64_t>(run),
       .block_tokens = options_.block_tokens, .block_bytes = static_cast<double>(options_.block_bytes)});
  if (static_cast<size_t>(decision.load_blocks) < run) {
    {
      std::lock_guard l(mu_);
      ++stats_.declined_loads;
      stats_.declined_blocks += run - static_cast<size_t>(decision.load_blocks);
    }
    run = static_cast<size_t>(decision.load_blocks);
    from_store = 0;
    for (size_t i = 0; i < run; ++i) from_store += staged[i] ? 0 : 1;
  }
  std::vector<std::string> values;
  std::vector<absl::Status> statuses;
  if (from_store > 0 && !client.BatchGet(options_.ns, std::span(ask).first(from_store), &values, &statuses).ok()) {
    store_failed = true;
    values.clear();
    statuses.clear();
  }
  // The real bytes must come back: the block's own hash leads them.
  auto good = [&](size_t a) {
    return a < statuses.size() && a < values.size() && statuses[a].ok() && values[a].size() == options_.block_bytes &&
           std::memcmp(values[a].data(), &ask[a], sizeof(uint64_t)) == 0;
  };
  size_t a = 0;
  for (; r.blocks < run; ++r.blocks) {
    if (!staged[r.blocks]) {
      if (!good(a)) break;
      ++a;
    }
    r.bytes += options_.block_bytes;
  }
  if (a < from_store && !store_failed) {
    // Failed reads: those blocks count as gone from the store tier, and are recomputed.
    std::lock_guard l(mu_);
    for (size_t i = a; i < from_store; ++i) {
      if (good(i)) continue;
      stored_.erase(ask[i]);
      gone.push_back(ask[i]);
    }
    store_failed = a == 0 && !statuses.empty() && absl::IsUnavailable(statuses[0]);
  }
  r.wall = Since(start);
  {
    std::lock_guard l(mu_);
    if (store_failed || a < from_store) ++stats_.load_failures;
    stats_.loaded_blocks += r.blocks;
    stats_.loaded_bytes += r.bytes;
    stats_.load_seconds += static_cast<double>(r.wall) / 1e9;
  }
  if (!gone.empty() && sink_) {
    CacheEvent e{CacheEvent::Kind::kRemoved, std::move(gone), std::nullopt, {}, {}};
    e.medium = CacheEvent::Medium::kCpu;
    sink_({std::move(e)});
  }
  *store_failed_out = store_failed;
  return r;
}

}  // namespace myriad::emu
