// KvEventPublisher -> KvEventSubscriber over real ZMQ on loopback, ephemeral ports. No blind
// sleeps: every wait is for a condition, with a deadline.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <vector>

#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "net/kv_event_publisher.h"
#include "net/kv_event_subscriber.h"

namespace myriad::net {
namespace {

using namespace std::chrono_literals;

struct Received {
  uint64_t seq;
  bool ok;
  bool replayed;
  bool restart;
  uint64_t missing_before;
  double ts;
};

// Collects deliveries from the subscriber's thread.
class Collector {
 public:
  KvEventSubscriber::Callback callback() {
    return [this](const KvEventDelivery& d) {
      std::lock_guard lock(mu_);
      got_.push_back({d.seq, d.batch.ok(), d.replayed, d.restart, d.missing_before,
                      d.batch.ok() ? d.batch->ts : -1});
      cv_.notify_all();
    };
  }

  // Waits until pred(deliveries) holds or the deadline passes; returns whether it held.
  bool WaitFor(const std::function<bool(const std::vector<Received>&)>& pred,
               std::chrono::milliseconds timeout = 10s) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return pred(got_); });
  }

  size_t size() {
    std::lock_guard lock(mu_);
    return got_.size();
  }

  std::vector<Received> snapshot() {
    std::lock_guard lock(mu_);
    return got_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Received> got_;
};

KvEventBatch Batch(double ts) {
  KvEventBatch b;
  b.ts = ts;
  b.events.push_back(BlockRemoved{.block_hashes = {static_cast<uint64_t>(ts)}, .medium = "GPU"});
  return b;
}

std::unique_ptr<KvEventPublisher> MakePublisher(const std::string& endpoint = "tcp://127.0.0.1:*",
                                                const std::string& replay = "tcp://127.0.0.1:*") {
  KvEventPublisherOptions o;
  o.endpoint = endpoint;
  o.replay_endpoint = replay;
  o.topic = "kv";
  auto p = KvEventPublisher::Create(o);
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? std::move(*p) : nullptr;
}

std::unique_ptr<KvEventSubscriber> MakeSubscriber(const KvEventPublisher& pub, Collector* c,
                                                  std::chrono::milliseconds replay_timeout = 2s) {
  KvEventSubscriberOptions o;
  o.sources.push_back({"engine-0", pub.endpoint(), pub.replay_endpoint(), "kv"});
  o.replay_timeout = replay_timeout;
  auto s = KvEventSubscriber::Start(o, c->callback());
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? std::move(*s) : nullptr;
}

// A SUB socket connects asynchronously and misses what is sent before: publish until the
// first batch arrives (the replay-on-join fills whatever the connection delay lost), then wait
// until every batch published so far has been delivered. Returns how many were published.
size_t PublishUntilConnected(KvEventPublisher& pub, Collector& c, double ts_base) {
  size_t published = 0;
  for (int i = 0; i < 100; ++i) {
    EXPECT_TRUE(pub.Publish(Batch(ts_base + i)).ok());
    ++published;
    if (c.WaitFor([](const auto& got) { return !got.empty(); }, 100ms)) break;
  }
  EXPECT_TRUE(c.WaitFor([&](const auto& got) { return got.size() == published; }))
      << "the subscriber never caught up";
  return published;
}

bool InOrderFromZero(const std::vector<Received>& got) {
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i].seq != i || !got[i].ok) return false;
  }
  return true;
}

TEST(KvEventTransport, DeliversInOrderAndReplaysWhatTheJoinMissed) {
  auto pub = MakePublisher();
  ASSERT_NE(pub, nullptr);
  EXPECT_NE(pub->endpoint().find("tcp://127.0.0.1:"), std::string::npos);
  Collector c;
  auto sub = MakeSubscriber(*pub, &c);
  ASSERT_NE(sub, nullptr);
  PublishUntilConnected(*pub, c, 0);
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(pub->Publish(Batch(1000 + i)).ok());
  ASSERT_TRUE(c.WaitFor([](const auto& got) { return !got.empty() && got.back().ts == 1019; }));
  const auto got = c.snapshot();
  EXPECT_TRUE(InOrderFromZero(got));
  for (const auto& r : got) EXPECT_EQ(r.missing_before, 0u);
  sub->Stop();
  EXPECT_EQ(sub->stats().missing, 0u);
}

TEST(KvEventTransport, GapIsFilledByReplayInOrder) {
  auto pub = MakePublisher();
  ASSERT_NE(pub, nullptr);
  Collector c;
  auto sub = MakeSubscriber(*pub, &c);
  ASSERT_NE(sub, nullptr);
  const size_t before = PublishUntilConnected(*pub, c, 0);
  pub->DropLiveForTesting(5);  // buffered for replay, never sent live
  for (int i = 0; i < 6; ++i) ASSERT_TRUE(pub->Publish(Batch(500 + i)).ok());
  ASSERT_TRUE(c.WaitFor([](const auto& got) { return !got.empty() && got.back().ts == 505; }));
  const auto got = c.snapshot();
  EXPECT_TRUE(InOrderFromZero(got));
  ASSERT_EQ(got.size(), before + 6);
  for (size_t i = before; i < before + 5; ++i) EXPECT_TRUE(got[i].replayed) << i;
  EXPECT_FALSE(got.back().replayed);
  EXPECT_EQ(got.back().missing_before, 0u);
  EXPECT_GE(sub->stats().replay_requests, 1u);
}

TEST(KvEventTransport, UnfilledGapIsReportedAfterABoundedWait) {
  // No replay endpoint on the publisher's side to answer: the subscriber asks a dead address.
  auto pub = MakePublisher("tcp://127.0.0.1:*", "");
  ASSERT_NE(pub, nullptr);
  Collector c;
  KvEventSubscriberOptions o;
  o.sources.push_back({"engine-0", pub->endpoint(), "tcp://127.0.0.1:1", "kv"});
  o.replay_timeout = 200ms;
  o.replay_on_join = false;  // the join's losses would each cost a timeout here
  auto sub = KvEventSubscriber::Start(o, c.callback());
  ASSERT_TRUE(sub.ok()) << sub.status();
  uint64_t last = 0;
  for (int i = 0; i < 100; ++i) {
    last = *pub->Publish(Batch(i));
    if (c.WaitFor([](const auto& got) { return !got.empty(); }, 100ms)) break;
  }
  ASSERT_TRUE(c.WaitFor([&](const auto& got) { return !got.empty() && got.back().seq == last; }));
  pub->DropLiveForTesting(3);
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(pub->Publish(Batch(700 + i)).ok());
  ASSERT_TRUE(c.WaitFor([](const auto& got) { return got.back().ts == 703; }));
  EXPECT_EQ(c.snapshot().back().seq, last + 4);
  EXPECT_EQ(c.snapshot().back().missing_before, 3u);
  EXPECT_GE((*sub)->stats().replay_timeouts, 1u);
}

TEST(KvEventTransport, PublisherRestartIsFlagged) {
  auto pub = MakePublisher();
  ASSERT_NE(pub, nullptr);
  const std::string endpoint = pub->endpoint();
  const std::string replay = pub->replay_endpoint();
  Collector c;
  auto sub = MakeSubscriber(*pub, &c);
  ASSERT_NE(sub, nullptr);
  PublishUntilConnected(*pub, c, 0);
  for (int i = 0; i < 30; ++i) ASSERT_TRUE(pub->Publish(Batch(100 + i)).ok());
  ASSERT_TRUE(c.WaitFor([](const auto& got) { return got.back().ts == 129; }));
  const size_t before = c.size();
  pub->Stop();
  pub.reset();
  // The new process binds the same ports and counts from 0 again. It must be seen before its
  // sequence passes the old one's (30+), or the restart would look like a gap.
  auto pub2 = MakePublisher(endpoint, replay);
  ASSERT_NE(pub2, nullptr);
  for (int i = 0; i < 25; ++i) {
    ASSERT_TRUE(pub2->Publish(Batch(2000 + i)).ok());
    if (c.WaitFor([&](const auto& got) { return got.size() > before; }, 100ms)) break;
  }
  ASSERT_TRUE(c.WaitFor([&](const auto& got) { return got.size() > before; }));
  const auto got = c.snapshot();
  EXPECT_TRUE(got[before].restart);
  EXPECT_EQ(got[before].seq, 0u);  // replay-on-restart fetched the new process's first batches
  EXPECT_EQ(got[before].ts, 2000);
  EXPECT_EQ(sub->stats().restarts, 1u);
}

TEST(KvEventTransport, MalformedFramesAreCountedAndSurvived) {
  zmq::context_t ctx;
  zmq::socket_t raw(ctx, zmq::socket_type::pub);
  raw.set(zmq::sockopt::linger, 0);
  raw.bind("tcp://127.0.0.1:*");
  const std::string endpoint = raw.get(zmq::sockopt::last_endpoint);
  Collector c;
  KvEventSubscriberOptions o;
  o.sources.push_back({"raw", endpoint, "", ""});
  o.replay_on_join = false;
  auto sub = KvEventSubscriber::Start(o, c.callback());
  ASSERT_TRUE(sub.ok()) << sub.status();
  auto send_good = [&](uint64_t seq) {
    const auto payload = EncodeKvEventBatch(Batch(static_cast<double>(seq)));
    uint8_t s[8];
    for (int i = 0; i < 8; ++i) s[i] = static_cast<uint8_t>(seq >> (56 - 8 * i));
    raw.send(zmq::str_buffer(""), zmq::send_flags::sndmore);
    raw.send(zmq::buffer(s), zmq::send_flags::sndmore);
    raw.send(zmq::buffer(payload), zmq::send_flags::none);
  };
  uint64_t seq = 0;
  for (int i = 0; i < 100 && !c.WaitFor([](const auto& got) { return !got.empty(); }, 100ms); ++i) {
    send_good(seq++);
  }
  ASSERT_GT(c.size(), 0u);
  const uint64_t next = c.snapshot().back().seq + 1;
  seq = next;
  raw.send(zmq::str_buffer("only-one-frame"), zmq::send_flags::none);
  raw.send(zmq::str_buffer(""), zmq::send_flags::sndmore);  // a 3-byte sequence number
  raw.send(zmq::str_buffer("abc"), zmq::send_flags::sndmore);
  raw.send(zmq::str_buffer("x"), zmq::send_flags::none);
  uint8_t s[8] = {0, 0, 0, 0, 0, 0, 0, static_cast<uint8_t>(seq)};
  raw.send(zmq::str_buffer(""), zmq::send_flags::sndmore);  // garbage payload: delivered as error
  raw.send(zmq::buffer(s), zmq::send_flags::sndmore);
  raw.send(zmq::str_buffer("\xc1\xc1"), zmq::send_flags::none);
  send_good(seq + 1);
  ASSERT_TRUE(c.WaitFor([&](const auto& got) { return got.back().seq == seq + 1; }));
  const auto got = c.snapshot();
  EXPECT_FALSE(got[got.size() - 2].ok);
  EXPECT_TRUE(got.back().ok);
  (*sub)->Stop();
  EXPECT_EQ((*sub)->stats().malformed_frames, 2u);
  EXPECT_EQ((*sub)->stats().decode_errors, 1u);
}

// The frames themselves, read with plain ZMQ sockets as a vLLM consumer would.
TEST(KvEventTransport, WireFramesAreVllms) {
  auto pub = MakePublisher();
  ASSERT_NE(pub, nullptr);
  zmq::context_t ctx;
  zmq::socket_t sub(ctx, zmq::socket_type::sub);
  sub.set(zmq::sockopt::linger, 0);
  sub.set(zmq::sockopt::subscribe, "kv");
  sub.set(zmq::sockopt::rcvtimeo, 100);
  sub.connect(pub->endpoint());
  std::vector<zmq::message_t> frames;
  for (int i = 0; i < 100 && frames.empty(); ++i) {
    ASSERT_TRUE(pub->Publish(Batch(i)).ok());
    (void)zmq::recv_multipart(sub, std::back_inserter(frames));
  }
  ASSERT_EQ(frames.size(), 3u);
  EXPECT_EQ(frames[0].to_string(), "kv");
  ASSERT_EQ(frames[1].size(), 8u);
  const auto* seq = static_cast<const uint8_t*>(frames[1].data());
  const uint64_t first_seen = uint64_t{seq[6]} << 8 | seq[7];  // big-endian, small here
  EXPECT_EQ(seq[0], 0);
  auto batch = DecodeKvEventBatch(
      {static_cast<const uint8_t*>(frames[2].data()), frames[2].size()});
  ASSERT_TRUE(batch.ok()) << batch.status();
  EXPECT_EQ(batch->ts, static_cast<double>(first_seen));  // Batch(i) went out as seq i

  // Replay: a DEALER sends ["", start]; the ROUTER sees [identity, "", start] and answers
  // ["", seq, payload] per batch >= start, then ["", -1 as 8 bytes, ""].
  zmq::socket_t dealer(ctx, zmq::socket_type::dealer);
  dealer.set(zmq::sockopt::linger, 0);
  dealer.set(zmq::sockopt::rcvtimeo, 5000);
  dealer.connect(pub->replay_endpoint());
  const uint8_t start[8] = {0, 0, 0, 0, 0, 0, 0, static_cast<uint8_t>(first_seen)};
  dealer.send(zmq::message_t(), zmq::send_flags::sndmore);
  dealer.send(zmq::buffer(start), zmq::send_flags::none);
  uint64_t expect = first_seen;
  for (;;) {
    std::vector<zmq::message_t> reply;
    ASSERT_TRUE(zmq::recv_multipart(dealer, std::back_inserter(reply)));
    ASSERT_EQ(reply.size(), 3u);
    EXPECT_EQ(reply[0].size(), 0u);
    ASSERT_EQ(reply[1].size(), 8u);
    const auto* s = static_cast<const uint8_t*>(reply[1].data());
    if (std::all_of(s, s + 8, [](uint8_t b) { return b == 0xff; })) {
      EXPECT_EQ(reply[2].size(), 0u);
      break;
    }
    EXPECT_EQ(uint64_t{s[7]}, expect++);
  }
  EXPECT_EQ(expect, first_seen + 1);  // the buffer holds batches 0..first_seen
}

TEST(KvEventTransport, StopIsPromptAndIdempotent) {
  auto pub = MakePublisher();
  ASSERT_NE(pub, nullptr);
  Collector c;
  auto sub = MakeSubscriber(*pub, &c);
  ASSERT_NE(sub, nullptr);
  const auto t0 = std::chrono::steady_clock::now();
  sub->Stop();
  sub->Stop();
  pub->Stop();
  pub->Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 2s);
  EXPECT_FALSE(pub->Publish(Batch(1)).ok());
}

}  // namespace
}  // namespace myriad::net
