#include "net/kv_event_subscriber.h"

#include <atomic>
#include <iterator>
#include <optional>
#include <thread>
#include <utility>

#include <fmt/format.h>

#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "net/kv_event_wire.h"

namespace myriad::net {
namespace {

using Clock = std::chrono::steady_clock;

std::span<const uint8_t> Bytes(const zmq::message_t& m) {
  return {static_cast<const uint8_t*>(m.data()), m.size()};
}

// Live messages taken from one socket before looking at the others, so that one busy engine
// cannot starve the rest.
constexpr int kDrainBurst = 64;

}  // namespace

struct KvEventSubscriber::Impl {
  struct Source {
    KvEventSource config;
    std::optional<zmq::socket_t> sub;
    std::optional<zmq::socket_t> dealer;  // created at the first replay, dropped on a timeout
    bool seen = false;
    uint64_t expected = 0;  // the next seq to deliver
    bool restart_pending = false;
  };

  struct Counters {
    std::atomic<uint64_t> delivered{0}, replayed{0}, decode_errors{0}, malformed_frames{0},
        restarts{0}, replay_requests{0}, replay_timeouts{0}, missing{0};
  };

  KvEventSubscriberOptions options;
  Callback callback;
  zmq::context_t ctx{1};
  std::vector<Source> sources;
  Counters counters;
  std::thread thread;
  std::atomic<bool> stopped{false};

  void Run() {
    std::vector<zmq::pollitem_t> items;
    for (Source& s : sources) items.push_back({s.sub->handle(), 0, ZMQ_POLLIN, 0});
    try {
      for (;;) {
        zmq::poll(items, std::chrono::milliseconds(-1));
        for (size_t i = 0; i < sources.size(); ++i) {
          if ((items[i].revents & ZMQ_POLLIN) == 0) continue;
          for (int n = 0; n < kDrainBurst; ++n) {
            std::vector<zmq::message_t> frames;
            if (!zmq::recv_multipart(*sources[i].sub, std::back_inserter(frames),
                                     zmq::recv_flags::dontwait)) {
              break;
            }
            OnLive(i, frames);
          }
        }
      }
    } catch (const zmq::error_t&) {
      // ETERM: Stop() shut the context down.
    }
    for (Source& s : sources) {
      s.sub->close();
      if (s.dealer) s.dealer->close();
    }
  }

  void OnLive(size_t i, std::vector<zmq::message_t>& frames) {
    if (frames.size() != 3 || frames[1].size() != 8) {
      ++counters.malformed_frames;
      return;
    }
    Source& s = sources[i];
    const uint64_t seq = DecodeSeq(Bytes(frames[1]));
    if (s.seen && seq < s.expected) {
      ++counters.restarts;
      s.restart_pending = true;
      s.expected = 0;
    } else if (!s.seen && !options.replay_on_join) {
      s.expected = seq;
    }
    s.seen = true;
    if (seq > s.expected && !s.config.replay_endpoint.empty()) Replay(i, seq);
    Deliver(i, seq, Bytes(frames[2]), /*replayed=*/false);
  }

  // Fetches [s.expected, until) from the source's replay endpoint and delivers what comes, in
  // order. Batches at or past `until` are ignored: they arrive live.
  void Replay(size_t i, uint64_t until) {
    Source& s = sources[i];
    ++counters.replay_requests;
    const auto deadline = Clock::now() + options.replay_timeout;
    try {
      if (!s.dealer) {
        s.dealer.emplace(ctx, zmq::socket_type::dealer);
        s.dealer->set(zmq::sockopt::linger, 0);
        s.dealer->set(zmq::sockopt::sndtimeo, static_cast<int>(options.replay_timeout.count()));
        s.dealer->connect(s.config.replay_endpoint);
      }
      // A DEALER adds no delimiter itself: the ROUTER must read [identity, "", start_seq].
      const auto start = EncodeSeq(s.expected);
      if (!s.dealer->send(zmq::message_t(), zmq::send_flags::sndmore) ||
          !s.dealer->send(zmq::buffer(start), zmq::send_flags::none)) {
        return DropDealer(s);
      }
      for (;;) {
        const auto left =
            std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
        zmq::pollitem_t item{s.dealer->handle(), 0, ZMQ_POLLIN, 0};
        if (left.count() <= 0 || zmq::poll(&item, 1, left) == 0) return DropDealer(s);
        std::vector<zmq::message_t> frames;
        if (!zmq::recv_multipart(*s.dealer, std::back_inserter(frames),
                                 zmq::recv_flags::dontwait)) {
          continue;
        }
        // [""(delimiter), seq, payload]
        if (frames.size() != 3 || frames[1].size() != 8) {
          ++counters.malformed_frames;
          continue;
        }
        const uint64_t seq = DecodeSeq(Bytes(frames[1]));
        if (seq == kReplayEndSeq) return;
        if (seq >= s.expected && seq < until) Deliver(i, seq, Bytes(frames[2]), true);
      }
    } catch (const zmq::error_t& e) {
      if (e.num() == ETERM) throw;
      DropDealer(s);
    }
  }

  // After a timeout or an error the DEALER may still receive the old answer: a fresh socket
  // keeps it from being taken for the next one's.
  void DropDealer(Source& s) {
    ++counters.replay_timeouts;
    if (s.dealer) s.dealer->close();
    s.dealer.reset();
  }

  void Deliver(size_t i, uint64_t seq, std::span<const uint8_t> payload, bool replayed) {
    Source& s = sources[i];
    KvEventDelivery d{.source = i,
                      .source_id = s.config.id,
                      .seq = seq,
                      .batch = DecodeKvEventBatch(payload),
                      .replayed = replayed,
                      .restart = s.restart_pending,
                      .missing_before = seq > s.expected ? seq - s.expected : 0};
    s.restart_pending = false;
    s.expected = seq + 1;
    ++counters.delivered;
    if (replayed) ++counters.replayed;
    if (!d.batch.ok()) ++counters.decode_errors;
    counters.missing += d.missing_before;
    callback(d);
  }
};

KvEventSubscriber::KvEventSubscriber(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

KvEventSubscriber::~KvEventSubscriber() { Stop(); }

absl::StatusOr<std::unique_ptr<KvEventSubscriber>> KvEventSubscriber::Start(
    KvEventSubscriberOptions options, Callback callback) {
  if (options.sources.empty()) return absl::InvalidArgumentError("sources: empty");
  auto impl = std::make_unique<Impl>();
  impl->options = std::move(options);
  impl->callback = std::move(callback);
  for (size_t i = 0; i < impl->options.sources.size(); ++i) {
    Impl::Source s;
    s.config = impl->options.sources[i];
    try {
      s.sub.emplace(impl->ctx, zmq::socket_type::sub);
      s.sub->set(zmq::sockopt::linger, 0);
      s.sub->set(zmq::sockopt::rcvhwm, impl->options.rcvhwm);
      s.sub->set(zmq::sockopt::subscribe, s.config.topic);
      s.sub->connect(s.config.endpoint);
    } catch (const zmq::error_t& e) {
      for (Impl::Source& done : impl->sources) done.sub->close();
      if (s.sub) s.sub->close();
      return absl::InvalidArgumentError(
          fmt::format("sources[{}].endpoint '{}': {}", i, s.config.endpoint, e.what()));
    }
    impl->sources.push_back(std::move(s));
  }
  Impl* raw = impl.get();
  impl->thread = std::thread([raw] { raw->Run(); });
  return std::unique_ptr<KvEventSubscriber>(new KvEventSubscriber(std::move(impl)));
}

void KvEventSubscriber::Stop() {
  if (impl_->stopped.exchange(true)) return;
  impl_->ctx.shutdown();  // every blocking call of the thread returns ETERM
  if (impl_->thread.joinable()) impl_->thread.join();
  impl_->ctx.close();
}

KvEventSubscriberStats KvEventSubscriber::stats() const {
  const Impl::Counters& c = impl_->counters;
  return {c.delivered.load(),        c.replayed.load(),        c.decode_errors.load(),
          c.malformed_frames.load(), c.restarts.load(),        c.replay_requests.load(),
          c.replay_timeouts.load(),  c.missing.load()};
}

}  // namespace myriad::net
