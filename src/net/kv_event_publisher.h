#pragma once
// A publisher of KV-cache events speaking vLLM's ZMQ protocol (vllm/distributed/kv_events.py,
// ZmqEventPublisher), for the engine emulator and for tests:
// - PUB: every batch is three frames [topic, seq as 8 bytes big-endian, msgpack payload]; seq
//   counts from 0 for each publisher, so a new process starts again at 0.
// - ROUTER (optional replay endpoint): a request [identity, "", start_seq as 8 bytes BE] is
//   answered, for each of the last `buffer_steps` batches with seq >= start_seq in order, by
//   [identity, "", seq, payload], then by the terminator [identity, "", -1 as 8 bytes, ""].
//   As in vLLM, a request of another shape is dropped without an answer.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "net/kv_events.h"

namespace myriad::net {

struct KvEventPublisherOptions {
  // Bound (this publisher always binds): "tcp://127.0.0.1:*" picks a free port.
  std::string endpoint = "tcp://*:5557";
  std::string replay_endpoint;  // empty: no replay
  size_t buffer_steps = 10'000;
  int hwm = 100'000;
  std::string topic;
  KvEventEncoding encoding = KvEventEncoding::kMap;
};

// "tcp://host:5557" + 2 -> "tcp://host:5559": vLLM's DP ranks publish on consecutive ports.
// nullopt when the port is not a number (and the offset is not 0) or passes 65535.
std::optional<std::string> OffsetEndpointPort(const std::string& endpoint, int offset);

// Whether a ZMQ endpoint to connect to is well-formed: tcp://HOST:PORT (port 1-65535),
// ipc://PATH or inproc://NAME. A config check, so that a typo is found before start.
absl::Status ValidateZmqConnectEndpoint(std::string_view endpoint);

class KvEventPublisher {
 public:
  // Binds the sockets and starts the replay thread (when there is a replay endpoint).
  static absl::StatusOr<std::unique_ptr<KvEventPublisher>> Create(KvEventPublisherOptions options);
  ~KvEventPublisher();  // Stop()
  KvEventPublisher(const KvEventPublisher&) = delete;
  KvEventPublisher& operator=(const KvEventPublisher&) = delete;

  // Encodes and sends one batch; returns its sequence number. Thread-safe.
  absl::StatusOr<uint64_t> Publish(const KvEventBatch& batch);
  // Sends an already encoded payload (or, in tests, a malformed one).
  absl::StatusOr<uint64_t> PublishPayload(std::span<const uint8_t> payload);

  // The endpoints actually bound (ZMQ_LAST_ENDPOINT), ports resolved.
  const std::string& endpoint() const;
  const std::string& replay_endpoint() const;

  // The next `n` batches get sequence numbers and enter the replay buffer but are not sent, as
  // if a slow subscriber's queue had overflowed: tests use it to make a gap.
  void DropLiveForTesting(int n);

  // Closes the sockets and joins the replay thread; idempotent.
  void Stop();

 private:
  struct Impl;
  explicit KvEventPublisher(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace myriad::net
