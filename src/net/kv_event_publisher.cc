#include "net/kv_event_publisher.h"

#include <deque>
#include <iterator>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "net/kv_event_wire.h"

namespace myriad::net {
namespace {

using Payload = std::shared_ptr<const std::vector<uint8_t>>;

std::span<const uint8_t> Bytes(const zmq::message_t& m) {
  return {static_cast<const uint8_t*>(m.data()), m.size()};
}

}  // namespace

struct KvEventPublisher::Impl {
  KvEventPublisherOptions options;
  zmq::context_t ctx{1};
  std::string endpoint;
  std::string replay_endpoint;

  std::mutex mu;  // guards everything below but `replay`, which only the replay thread uses
  std::optional<zmq::socket_t> pub;
  std::deque<std::pair<uint64_t, Payload>> buffer;  // the last buffer_steps batches
  uint64_t next_seq = 0;
  int drop_live = 0;
  bool stopped = false;

  std::optional<zmq::socket_t> replay;
  std::thread thread;

  // Answers replay requests until the context is shut down.
  void ReplayLoop() {
    try {
      for (;;) {
        std::vector<zmq::message_t> frames;
        if (!zmq::recv_multipart(*replay, std::back_inserter(frames))) continue;
        if (frames.size() != 3 || frames[2].size() > 8) continue;  // as vLLM: not answered
        const uint64_t start = DecodeSeq(Bytes(frames[2]));
        std::vector<std::pair<uint64_t, Payload>> batches;
        {
          std::lock_guard lock(mu);
          for (const auto& entry : buffer) {
            if (entry.first >= start) batches.push_back(entry);
          }
        }
        const std::string identity = frames[0].to_string();
        for (const auto& [seq, payload] : batches) {
          const auto seq_bytes = EncodeSeq(seq);
          replay->send(zmq::buffer(identity), zmq::send_flags::sndmore);
          replay->send(zmq::message_t(), zmq::send_flags::sndmore);
          replay->send(zmq::buffer(seq_bytes), zmq::send_flags::sndmore);
          replay->send(zmq::buffer(*payload), zmq::send_flags::none);
        }
        const auto end = EncodeSeq(kReplayEndSeq);
        replay->send(zmq::buffer(identity), zmq::send_flags::sndmore);
        replay->send(zmq::message_t(), zmq::send_flags::sndmore);
        replay->send(zmq::buffer(end), zmq::send_flags::sndmore);
        replay->send(zmq::message_t(), zmq::send_flags::none);
      }
    } catch (const zmq::error_t&) {
      // ETERM: Stop() shut the context down.
    }
    replay->close();
  }
};

KvEventPublisher::KvEventPublisher(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

KvEventPublisher::~KvEventPublisher() { Stop(); }

absl::StatusOr<std::unique_ptr<KvEventPublisher>> KvEventPublisher::Create(
    KvEventPublisherOptions options) {
  if (options.buffer_steps == 0 && !options.replay_endpoint.empty()) {
    return absl::InvalidArgumentError("buffer_steps: must be positive with a replay endpoint");
  }
  auto impl = std::make_unique<Impl>();
  impl->options = std::move(options);
  const char* field = "endpoint";
  try {
    impl->pub.emplace(impl->ctx, zmq::socket_type::pub);
    impl->pub->set(zmq::sockopt::linger, 0);
    impl->pub->set(zmq::sockopt::sndhwm, impl->options.hwm);
    impl->pub->bind(impl->options.endpoint);
    impl->endpoint = impl->pub->get(zmq::sockopt::last_endpoint);
    if (!impl->options.replay_endpoint.empty()) {
      field = "replay_endpoint";
      impl->replay.emplace(impl->ctx, zmq::socket_type::router);
      impl->replay->set(zmq::sockopt::linger, 0);
      impl->replay->bind(impl->options.replay_endpoint);
      impl->replay_endpoint = impl->replay->get(zmq::sockopt::last_endpoint);
    }
  } catch (const zmq::error_t& e) {
    const std::string& value =
        field == std::string_view("endpoint") ? impl->options.endpoint : impl->options.replay_endpoint;
    if (impl->pub) impl->pub->close();
    if (impl->replay) impl->replay->close();
    return absl::InvalidArgumentError(fmt::format("{} '{}': {}", field, value, e.what()));
  }
  if (impl->replay) {
    Impl* raw = impl.get();
    impl->thread = std::thread([raw] { raw->ReplayLoop(); });
  }
  return std::unique_ptr<KvEventPublisher>(new KvEventPublisher(std::move(impl)));
}

absl::StatusOr<uint64_t> KvEventPublisher::Publish(const KvEventBatch& batch) {
  return PublishPayload(EncodeKvEventBatch(batch, impl_->options.encoding));
}

absl::StatusOr<uint64_t> KvEventPublisher::PublishPayload(std::span<const uint8_t> payload) {
  auto stored = std::make_shared<const std::vector<uint8_t>>(payload.begin(), payload.end());
  std::lock_guard lock(impl_->mu);
  if (impl_->stopped) return absl::FailedPreconditionError("publisher: stopped");
  const uint64_t seq = impl_->next_seq++;
  if (impl_->options.buffer_steps > 0) {
    impl_->buffer.emplace_back(seq, stored);
    if (impl_->buffer.size() > impl_->options.buffer_steps) impl_->buffer.pop_front();
  }
  if (impl_->drop_live > 0) {
    --impl_->drop_live;
    return seq;
  }
  try {
    const auto seq_bytes = EncodeSeq(seq);
    // PUB never blocks: past the high-water mark ZMQ drops, as it does for vLLM.
    impl_->pub->send(zmq::buffer(impl_->options.topic), zmq::send_flags::sndmore);
    impl_->pub->send(zmq::buffer(seq_bytes), zmq::send_flags::sndmore);
    impl_->pub->send(zmq::buffer(*stored), zmq::send_flags::none);
  } catch (const zmq::error_t& e) {
    return absl::UnavailableError(fmt::format("publisher {}: {}", impl_->endpoint, e.what()));
  }
  return seq;
}

const std::string& KvEventPublisher::endpoint() const { return impl_->endpoint; }
const std::string& KvEventPublisher::replay_endpoint() const { return impl_->replay_endpoint; }

void KvEventPublisher::DropLiveForTesting(int n) {
  std::lock_guard lock(impl_->mu);
  impl_->drop_live += n;
}

void KvEventPublisher::Stop() {
  {
    std::lock_guard lock(impl_->mu);
    if (impl_->stopped) return;
    impl_->stopped = true;
    impl_->pub->close();
  }
  impl_->ctx.shutdown();  // wakes the replay thread with ETERM
  if (impl_->thread.joinable()) impl_->thread.join();
  impl_->ctx.close();
}

std::optional<std::string> OffsetEndpointPort(const std::string& endpoint, int offset) {
  if (offset == 0) return endpoint;
  const size_t colon = endpoint.rfind(':');
  if (colon == std::string::npos) return std::nullopt;
  const std::string digits = endpoint.substr(colon + 1);
  if (digits.empty() || digits.size() > 5 || digits.find_first_not_of("0123456789") != std::string::npos) {
    return std::nullopt;
  }
  const int port = std::stoi(digits) + offset;
  if (port > 65535 || port < 1) return std::nullopt;
  return fmt::format("{}{}", endpoint.substr(0, colon + 1), port);
}

absl::Status ValidateZmqConnectEndpoint(std::string_view endpoint) {
  auto bad = [&](std::string_view why) {
    return absl::InvalidArgumentError(fmt::format("'{}' is not a ZMQ endpoint: {}", endpoint, why));
  };
  const size_t sep = endpoint.find("://");
  if (sep == std::string_view::npos) return bad("expected tcp://HOST:PORT, ipc://PATH or inproc://NAME");
  const std::string_view scheme = endpoint.substr(0, sep), rest = endpoint.substr(sep + 3);
  if (scheme == "ipc" || scheme == "inproc") {
    return rest.empty() ? bad("empty path") : absl::OkStatus();
  }
  if (scheme != "tcp") return bad(fmt::format("unknown transport '{}'", scheme));
  const size_t colon = rest.rfind(':');
  if (colon == std::string_view::npos || colon == 0) return bad("expected tcp://HOST:PORT");
  const std::string_view digits = rest.substr(colon + 1);
  int port = 0;
  if (digits.empty() || digits.size() > 5 ||
      digits.find_first_not_of("0123456789") != std::string_view::npos ||
      (port = std::stoi(std::string(digits))) < 1 || port > 65535) {
    return bad(fmt::format("port '{}' is not in [1, 65535]", digits));
  }
  return absl::OkStatus();
}

}  // namespace myriad::net
