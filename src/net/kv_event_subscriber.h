#pragma once
// The consumer side of vLLM's KV-event protocol (see kv_event_publisher.h for the frames): one
// background thread with a SUB socket per engine endpoint. It follows each source's sequence
// numbers: a gap is filled from the source's replay endpoint (a DEALER request with a bounded
// wait), the replayed batches delivered in order before the live one; a sequence going
// backwards is an engine restart and is flagged on the next delivery. Every batch, decoded or
// not, goes to one callback, on the subscriber's thread.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "net/kv_events.h"

namespace myriad::net {

struct KvEventSource {
  std::string id;               // names the source in deliveries, e.g. "unit-7/dp3"
  std::string endpoint;         // the engine's PUB endpoint, connected to
  std::string replay_endpoint;  // its ROUTER endpoint; empty: gaps stay gaps
  std::string topic;            // ZMQ prefix filter; empty: everything
};

struct KvEventSubscriberOptions {
  std::vector<KvEventSource> sources;
  // The longest one replay may take; past it the subscriber moves on and the gap stays (the
  // delivery's missing_before says how many batches were lost). Live batches of every source
  // wait meanwhile, queued by ZMQ.
  std::chrono::milliseconds replay_timeout{1000};
  // When the first batch seen from a source (or from its restarted engine) is not seq 0, ask
  // for replay from 0: a subscriber that joins late, or loses the first batches to ZMQ's
  // connection delay, still learns the parents of the blocks it will see stored next.
  bool replay_on_join = true;
  int rcvhwm = 100'000;
};

struct KvEventDelivery {
  size_t source = 0;  // index into KvEventSubscriberOptions::sources
  std::string_view source_id;  // valid during the callback
  uint64_t seq = 0;
  absl::StatusOr<KvEventBatch> batch;  // or why the payload did not decode
  bool replayed = false;               // came over the replay socket
  // The first delivery after the source's sequence went backwards (an engine restart).
  bool restart = false;
  // Batches before this one that were never delivered (not sent, or evicted before replay).
  uint64_t missing_before = 0;
};

struct KvEventSubscriberStats {
  uint64_t delivered = 0;
  uint64_t replayed = 0;          // of which came from replay
  uint64_t decode_errors = 0;
  uint64_t malformed_frames = 0;  // messages not of the protocol's shape, dropped
  uint64_t restarts = 0;
  uint64_t replay_requests = 0;
  uint64_t replay_timeouts = 0;
  uint64_t missing = 0;           // batches lost for good
};

class KvEventSubscriber {
 public:
  using Callback = std::function<void(const KvEventDelivery&)>;

  // Connects to every source and starts the thread. Fails on a malformed endpoint.
  static absl::StatusOr<std::unique_ptr<KvEventSubscriber>> Start(
      KvEventSubscriberOptions options, Callback callback);
  ~KvEventSubscriber();  // Stop()
  KvEventSubscriber(const KvEventSubscriber&) = delete;
  KvEventSubscriber& operator=(const KvEventSubscriber&) = delete;

  // Stops the thread (interrupting a replay wait) and closes the sockets; no callback runs
  // after it returns. Idempotent; not from inside the callback.
  void Stop();

  KvEventSubscriberStats stats() const;

 private:
  struct Impl;
  explicit KvEventSubscriber(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace myriad::net
