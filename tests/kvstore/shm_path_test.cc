// The same-host shared-memory data path: a ShmServer and a DataServer over one NodeStore, the
// DataClient (which finds the socket through the TCP path), the ShmChannel's lower-level calls,
// raw Unix sockets sending what a broken or hostile peer would, and a StoreClient against a
// cluster whose node offers the path.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "core/rng.h"
#include "kv_cluster.h"
#include "kvstore/data_client.h"
#include "kvstore/data_server.h"
#include "kvstore/shm_client.h"
#include "kvstore/shm_server.h"
#include "kvstore/shm_wire.h"
#include "kvstore/store_client.h"
#include "../test_util/temp_dir.h"

namespace myriad::kvstore {
namespace {

using testing::WaitFor;
constexpr uint64_t kToken = 0x5eed5eed12345678;

std::string SocketPath(std::string_view tag) {
  static int n = 0;
  return (myriad::testing::TestTempDir() / fmt::format("{}_{}.sock", tag, ++n)).string();
}

std::string Bytes(Rng& rng, size_t n) {
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng.Next());
  return s;
}

class ShmPathTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = SocketPath("node");
    ShmServerOptions so;
    so.path = path_;
    so.token = kToken;
    so.max_batch = 64;
    so.max_handles = max_handles_;
    so.spin = spin_;
    so.frame_timeout = 300 * kMillisecond;
    shm_ = std::make_unique<ShmServer>(&store_, so);
    ASSERT_TRUE(shm_->Start().ok());
    DataServerOptions o;
    o.threads = 1;
    o.max_body_bytes = (8 << 20) + 64;
    o.max_batch = 64;
    server_ = std::make_unique<DataServer>(&store_, o);
    server_->set_shm_socket(path_, kToken);
    ASSERT_TRUE(server_->Start().ok());
  }
  void TearDown() override {
    server_->Stop();
    shm_->Stop();
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(server_->port()); }
  std::unique_ptr<ShmChannel> Channel() {
    auto c = ShmChannel::Connect(path_, kToken, 2 * kSecond);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? std::move(*c) : nullptr;
  }

  // A raw client socket with a 3 s receive timeout, so a test never hangs.
  int Raw() {
    const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::memcpy(a.sun_path, path_.c_str(), path_.size());
    EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    timeval tv{3, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    return fd;
  }
  static void Send(int fd, const void* p, size_t n) {
    ASSERT_EQ(send(fd, p, n, MSG_NOSIGNAL), static_cast<ssize_t>(n));
  }
  // One reply's header and body (descriptors that come with it are closed); false when the
  // node closed the connection.
  static bool ReadReply(int fd, wire::Header* h, std::string* body) {
    if (recv(fd, h, sizeof *h, MSG_WAITALL) != static_cast<ssize_t>(sizeof *h)) return false;
    if (h->body_bytes > (1 << 20)) return false;
    body->resize(h->body_bytes);
    if (h->body_bytes == 0) return true;
    return recv(fd, body->data(), body->size(), MSG_WAITALL) == static_cast<ssize_t>(body->size());
  }
  static bool Closed(int fd) {
    char c;
    return recv(fd, &c, 1, 0) <= 0;
  }
  static wire::Header Request(shm::Op op, uint64_t body_bytes) {
    wire::Header h;
    h.op = static_cast<uint8_t>(op);
    h.request_id = 7;
    h.body_bytes = body_bytes;
    return h;
  }
  void Hello(int fd) {
    const wire::Header h = Request(shm::Op::kHello, 8);
    Send(fd, &h, sizeof h);
    Send(fd, &kToken, 8);
    wire::Header r;
    std::string body;
    ASSERT_TRUE(ReadReply(fd, &r, &body));  // the kernel closes the descriptors recv refused
    ASSERT_EQ(r.status, 0);
  }

  NodeStore store_{uint64_t{64} << 20, uint64_t{16} << 20, /*shareable=*/true};
  uint32_t max_handles_ = 65536;
  Nanos spin_ = shm::kDefaultSpin;
  std::string path_;
  std::unique_ptr<ShmServer> shm_;
  std::unique_ptr<DataServer> server_;
};

TEST_F(ShmPathTest, SharedMemoryAndTcpGiveTheSameBytes) {
  DataClient local(address());
  DataClient tcp(address(), {.shared_memory = false});
  ASSERT_TRUE(local.UsesSharedMemory());
  ASSERT_FALSE(tcp.UsesSharedMemory());
  Rng rng(11);
  const std::vector<size_t> sizes = {0, 1, 63, 64, 65, 4096, (1 << 20) + 3, 3 << 20};
  std::vector<ObjectName> names;
  std::vector<std::string> want;
  for (size_t i = 0; i < sizes.size(); ++i) {
    names.push_back({1, 100 + i});
    want.push_back(Bytes(rng, sizes[i]));
    // Alternate the writer: both readers must see the same bytes whoever wrote them.
    ASSERT_TRUE((i % 2 == 0 ? local : tcp).Put(names.back(), want.back()).ok()) << i;
  }
  names.push_back({1, 999});  // absent
  for (DataClient* c : {&local, &tcp}) {
    std::vector<std::string> got;
    std::vector<absl::StatusCode> codes;
    ASSERT_TRUE(c->Get(names, &got, &codes).ok());
    for (size_t i = 0; i < sizes.size(); ++i) {
      EXPECT_EQ(codes[i], absl::StatusCode::kOk) << i;
      EXPECT_TRUE(got[i] == want[i]) << "object " << i << " differs";
    }
    EXPECT_EQ(codes.back(), absl::StatusCode::kNotFound);
  }
  // Overwrites through shared memory replace the old version for both paths.
  ASSERT_TRUE(local.Put(names[3], "newer").ok());
  {
    std::vector<std::string> got;
    std::vector<absl::StatusCode> codes;
    ASSERT_TRUE(tcp.Get(std::span(&names[3], 1), &got, &codes).ok());
    EXPECT_EQ(got[0], "newer");
  }
  const ShmServerStats s = shm_->stats();
  EXPECT_EQ(s.puts, 5u);
  EXPECT_EQ(s.gets, 1u);
  EXPECT_EQ(s.get_misses, 1u);
  EXPECT_EQ(server_->stats().puts, 4u);  // the TCP writer's only
  EXPECT_TRUE(WaitFor([&] { return shm_->stats().held == 0; }));
  // Too large for a segment: the node's own error, the channel still up.
  absl::Status big = local.Put({1, 5}, std::string(17 << 20, 'x'));
  EXPECT_EQ(big.code(), absl::StatusCode::kInvalidArgument) << big;
  EXPECT_TRUE(local.UsesSharedMemory());
}

// A node whose connections may hold only 2 pins: a GET of 5 objects is refused in part over
// shared memory (ResourceExhausted), and the client takes the batch over TCP, which has no such
// limit, instead of failing it.
class ShmFewHandlesTest : public ShmPathTest {
 protected:
  void SetUp() override {
    max_handles_ = 2;
    ShmPathTest::SetUp();
  }
};

// With no polling before a wait sleeps (spin 0), node and client alike, the path gives the same
// bytes: every wait then sleeps in poll() at once.
class ShmNoSpinTest : public ShmPathTest {
 protected:
  void SetUp() override {
    spin_ = 0;
    ShmPathTest::SetUp();
  }
};

TEST_F(ShmNoSpinTest, PutsAndGetsWithSleepingWaits) {
  DataClient client(address(), {.shm_spin = 0});
  ASSERT_TRUE(client.UsesSharedMemory());
  Rng rng(3);
  std::vector<ObjectName> names;
  std::vector<std::string> want;
  for (uint64_t i = 0; i < 6; ++i) {
    names.push_back({3, i});
    want.push_back(Bytes(rng, 1000 + 50000 * i));
    ASSERT_TRUE(client.Put(names.back(), want.back()).ok()) << i;
  }
  std::vector<std::string> got;
  std::vector<absl::StatusCode> codes;
  ASSERT_TRUE(client.Get(names, &got, &codes).ok());
  for (size_t i = 0; i < names.size(); ++i) {
    EXPECT_EQ(codes[i], absl::StatusCode::kOk) << i;
    EXPECT_TRUE(got[i] == want[i]) << "object " << i << " differs";
  }
  EXPECT_EQ(shm_->stats().puts, 6u);
  EXPECT_EQ(server_->stats().gets, 0u);  // all of it over shared memory
}

TEST_F(ShmFewHandlesTest, GetRefusedInPartFallsBackToTcp) {
  DataClient client(address());
  ASSERT_TRUE(client.UsesSharedMemory());
  std::vector<ObjectName> names;
  std::vector<std::string> want;
  for (uint64_t i = 0; i < 5; ++i) {
    names.push_back({2, 40 + i});
    want.push_back(fmt::format("object {}", i));
    ASSERT_TRUE(client.Put(names.back(), want.back()).ok()) << i;
  }
  std::vector<std::string> got;
  std::vector<absl::StatusCode> codes;
  const absl::Status st = client.Get(names, &got, &codes);
  ASSERT_TRUE(st.ok()) << st;
  for (size_t i = 0; i < names.size(); ++i) {
    EXPECT_EQ(codes[i], absl::StatusCode::kOk) << i;
    EXPECT_EQ(got[i], want[i]) << i;
  }
  EXPECT_EQ(shm_->stats().gets, 1u);      // tried over shared memory first
  EXPECT_EQ(server_->stats().gets, 1u);   // then over TCP
  EXPECT_TRUE(client.UsesSharedMemory());  // the channel stays up for the next call
  EXPECT_TRUE(WaitFor([&] { return shm_->stats().held == 0; }));
}

// A node that goes away while a client is idle: the client's channel breaks and unmaps the
// node's segments with no call made (the process's hangup watcher sees the socket close), so
// it does not keep a dead node's memory alive. A live node's idle channel stays up.
TEST_F(ShmPathTest, IdleChannelUnmapsTheSegmentsWhenTheNodeGoesAway) {
  std::unique_ptr<ShmChannel> a = Channel();
  std::unique_ptr<ShmChannel> b = Channel();
  ASSERT_TRUE(a != nullptr && b != nullptr);
  ASSERT_GT(a->segments(), 0u);
  b.reset();  // a closed channel leaves the watcher's list
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(a->broken());
  EXPECT_GT(a->segments(), 0u);
  shm_->Stop();
  EXPECT_TRUE(WaitFor([&] { return a->broken() && a->segments() == 0; }));
  std::vector<std::string> got;
  std::vector<absl::StatusCode> codes;
  const ObjectName name{1, 1};
  EXPECT_EQ(a->Get(std::span(&name, 1), &got, &codes).code(), absl::StatusCode::kUnavailable);
}

TEST_F(ShmPathTest, PinnedObjectSurvivesDeleteAndReuseUntilReleased) {
  DataClient tcp(address(), {.shared_memory = false});
  Rng rng(5);
  const std::string value = Bytes(rng, 1 << 20);
  const ObjectName name{2, 1};
  ASSERT_TRUE(tcp.Put(name, value).ok());
  auto ch = Channel();
  ASSERT_NE(ch, nullptr);
  auto pinned = ch->Pin(std::span(&name, 1));
  ASSERT_TRUE(pinned.ok()) << pinned.status();
  const shm::Location loc = (*pinned)[0];
  ASSERT_EQ(loc.status, 0u);
  ASSERT_EQ(loc.size, value.size());
  // Delete it, write a new version under the same name, and fill the store with others: none
  // may land on the pinned bytes.
  ASSERT_TRUE(tcp.Delete(std::span(&name, 1)).ok());
  ASSERT_TRUE(tcp.Put(name, std::string(1 << 20, 'n')).ok());
  for (uint64_t k = 10;; ++k) {
    if (!tcp.Put({2, k}, std::string(1 << 20, 'f')).ok()) break;
    ASSERT_LT(k, 100u);
  }
  EXPECT_TRUE(std::memcmp(ch->At(loc), value.data(), value.size()) == 0);
  const uint64_t used = store_.stats().used_bytes;
  const uint32_t handle = loc.handle;
  ASSERT_TRUE(ch->Release(std::span(&handle, 1)).ok());
  EXPECT_TRUE(WaitFor([&] { return store_.stats().used_bytes == used - value.size(); }));
  // A release of the same handle again is refused and closes the connection.
  ASSERT_TRUE(ch->Release(std::span(&handle, 1)).ok());  // no reply to wait for
  auto again = ch->Pin(std::span(&name, 1));
  EXPECT_FALSE(again.ok());
  EXPECT_TRUE(ch->broken());
}

TEST_F(ShmPathTest, ConnectionLossReleasesPinsAndFreesReservations) {
  DataClient tcp(address(), {.shared_memory = false});
  const ObjectName held{3, 1}, written{3, 2};
  ASSERT_TRUE(tcp.Put(held, std::string(1000, 'h')).ok());
  const NodeStoreStats before = store_.stats();
  {
    auto ch = Channel();
    ASSERT_NE(ch, nullptr);
    ASSERT_TRUE(ch->Pin(std::span(&held, 1)).ok());
    const uint64_t size = 5000;
    auto room = ch->Reserve(std::span(&written, 1), std::span(&size, 1));
    ASSERT_TRUE(room.ok());
    ASSERT_EQ((*room)[0].status, 0u);
    std::memset(ch->At((*room)[0]), 'w', size);
    EXPECT_EQ(store_.stats().used_bytes, before.used_bytes + size);
    ASSERT_TRUE(tcp.Delete(std::span(&held, 1)).ok());  // doomed, still pinned
    EXPECT_EQ(store_.stats().used_bytes, before.used_bytes + size);
    // Not committed: invisible.
    std::vector<std::string> got;
    std::vector<absl::StatusCode> codes;
    ASSERT_TRUE(tcp.Get(std::span(&written, 1), &got, &codes).ok());
    EXPECT_EQ(codes[0], absl::StatusCode::kNotFound);
    EXPECT_EQ(shm_->stats().held, 2u);
  }  // the channel closes without releasing or committing
  EXPECT_TRUE(WaitFor([&] { return store_.stats().used_bytes == before.used_bytes - 1000; }));
  EXPECT_EQ(store_.stats().objects, before.objects - 1);
  EXPECT_EQ(shm_->stats().held, 0u);
  EXPECT_EQ(shm_->stats().aborts, 1u);
  EXPECT_EQ(shm_->stats().released_at_close, 1u);
}

TEST_F(ShmPathTest, CommitAndAbortThroughTheChannel) {
  auto ch = Channel();
  ASSERT_NE(ch, nullptr);
  const std::vector<ObjectName> names = {{4, 1}, {4, 2}};
  const std::vector<uint64_t> sizes = {10, 20};
  auto room = ch->Reserve(names, sizes);
  ASSERT_TRUE(room.ok());
  std::memcpy(ch->At((*room)[0]), "0123456789", 10);
  std::memset(ch->At((*room)[1]), 'x', 20);
  const std::vector<shm::EndItem> end = {{(*room)[0].handle, 1}, {(*room)[1].handle, 0},
                                         {12345, 1}};
  auto codes = ch->End(end);
  ASSERT_TRUE(codes.ok());
  EXPECT_EQ((*codes)[0], absl::StatusCode::kOk);
  EXPECT_EQ((*codes)[1], absl::StatusCode::kOk);
  EXPECT_EQ((*codes)[2], absl::StatusCode::kInvalidArgument);  // no such reservation
  std::vector<std::string> got;
  std::vector<absl::StatusCode> found;
  ASSERT_TRUE(ch->Get(names, &got, &found).ok());
  EXPECT_EQ(found[0], absl::StatusCode::kOk);
  EXPECT_EQ(got[0], "0123456789");
  EXPECT_EQ(found[1], absl::StatusCode::kNotFound);
  EXPECT_FALSE(ch->broken());
}

TEST_F(ShmPathTest, MalformedFramesGetErrorsNotCrashes) {
  struct Case {
    std::string name;
    wire::Header header;
    std::string body;
    bool hello;
    uint16_t code;  // 0: the node just closes
  };
  wire::Header bad_magic = Request(shm::Op::kGet, 0);
  bad_magic.magic = 0x12345678;
  wire::Header tcp_op = Request(shm::Op::kGet, 0);
  tcp_op.op = static_cast<uint8_t>(wire::Op::kGet);
  const wire::Header huge = Request(shm::Op::kGet, uint64_t{1} << 40);
  const auto k = [](uint32_t count, size_t items) {
    std::string b(8 + items, '\0');
    std::memcpy(b.data(), &count, 4);
    return b;
  };
  const std::string bad_count = k(3, 16);  // says 3, holds 1
  const std::string zero = k(0, 0);
  std::string reserved = k(1, 16);
  reserved[4] = 1;
  std::string release = k(1, 8);
  const uint32_t bogus = 77;
  std::memcpy(release.data() + 8, &bogus, 4);
  const std::vector<Case> cases = {
      {"bad magic", bad_magic, "", false, static_cast<uint16_t>(absl::StatusCode::kInvalidArgument)},
      {"tcp op on the shm socket", tcp_op, "", false, 3},
      {"body too large", huge, "", false, 3},
      {"get before hello", Request(shm::Op::kGet, 24), k(1, 16), false, 9},
      {"wrong token", Request(shm::Op::kHello, 8), std::string(8, 'x'), false, 7},
      {"count does not match", Request(shm::Op::kGet, bad_count.size()), bad_count, true, 3},
      {"zero count", Request(shm::Op::kPutStart, zero.size()), zero, true, 3},
      {"reserved field", Request(shm::Op::kGet, reserved.size()), reserved, true, 3},
      {"release of a handle never pinned", Request(shm::Op::kRelease, release.size()), release,
       true, 3},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const int fd = Raw();
    if (c.hello) Hello(fd);
    Send(fd, &c.header, sizeof c.header);
    if (!c.body.empty()) Send(fd, c.body.data(), c.body.size());
    wire::Header r;
    std::string message;
    ASSERT_TRUE(ReadReply(fd, &r, &message));
    EXPECT_EQ(r.status, c.code) << message;
    EXPECT_FALSE(message.empty());
    EXPECT_TRUE(Closed(fd));
    close(fd);
  }
  // Truncated frames: a header cut short, a body cut short, then the peer goes.
  for (size_t cut : {size_t{5}, size_t{24 + 10}}) {
    const int fd = Raw();
    Hello(fd);
    std::string frame(24 + 24, '\0');
    const wire::Header h = Request(shm::Op::kGet, 24);
    std::memcpy(frame.data(), &h, sizeof h);
    Send(fd, frame.data(), cut);
    close(fd);
  }
  // A peer that stalls mid-frame is cut off after the frame timeout.
  {
    const int fd = Raw();
    Hello(fd);
    const wire::Header h = Request(shm::Op::kGet, 24);
    Send(fd, &h, sizeof h);
    EXPECT_TRUE(Closed(fd));
    close(fd);
  }
  EXPECT_GE(shm_->stats().timeouts, 1u);
  // The node still serves.
  auto ch = Channel();
  ASSERT_NE(ch, nullptr);
  const ObjectName name{9, 9};
  EXPECT_TRUE(ch->Put(name, "still here").ok());
  EXPECT_TRUE(WaitFor([&] { return shm_->connections() == 1; }));
}

TEST_F(ShmPathTest, RandomFramesNeverCrashOrWedgeTheNode) {
  Rng rng(20261130);
  for (int i = 0; i < 300; ++i) {
    const int fd = Raw();
    if (rng.Bernoulli(0.7)) Hello(fd);
    wire::Header h = Request(static_cast<shm::Op>(14 + rng.Below(9)), rng.Below(120));
    if (rng.Bernoulli(0.1)) h.magic = static_cast<uint32_t>(rng.Next());
    std::string body(h.body_bytes, '\0');
    for (char& c : body) c = static_cast<char>(rng.Bernoulli(0.7) ? rng.Below(3) : rng.Next());
    if (body.size() >= 8) body[0] = static_cast<char>(1 + rng.Below(4));  // plausible counts
    // One send: the node may close after the header alone (a bad op), so no second one.
    std::string frame(reinterpret_cast<const char*>(&h), sizeof h);
    frame += body;
    (void)send(fd, frame.data(), frame.size(), MSG_NOSIGNAL);
    close(fd);
  }
  EXPECT_TRUE(WaitFor([&] { return shm_->connections() == 0 && shm_->stats().held == 0; }));
  EXPECT_EQ(store_.stats().used_bytes, 0u);
  auto ch = Channel();
  ASSERT_NE(ch, nullptr);
  EXPECT_TRUE(ch->Put({9, 1}, "fine").ok());
}

TEST(ShmManySegmentsTest, DescriptorsComeInGroupsForHundredsOfSegments) {
  NodeStore store(300 * 4096, 4096, /*shareable=*/true);  // 300 segments: more than one SCM_RIGHTS message holds
  ShmServerOptions o;
  o.path = SocketPath("many");
  o.token = kToken;
  ShmServer server(&store, o);
  ASSERT_TRUE(server.Start().ok());
  auto ch = ShmChannel::Connect(o.path, kToken, 2 * kSecond);
  ASSERT_TRUE(ch.ok()) << ch.status();
  EXPECT_EQ((*ch)->segments(), 300u);
  Rng rng(8);
  std::vector<ObjectName> names;
  std::vector<std::string> want;
  for (uint64_t k = 0; k < 600; ++k) {
    names.push_back({1, k});
    want.push_back(Bytes(rng, 1000));
    ASSERT_TRUE((*ch)->Put(names.back(), want.back()).ok()) << k;
  }
  std::vector<std::string> got;
  std::vector<absl::StatusCode> codes;
  ASSERT_TRUE((*ch)->Get(std::span(names).subspan(0, 4096 / 8), &got, &codes).ok());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(got[i] == want[i]) << i;
  // Wrong token: refused, and the node says why.
  auto wrong = ShmChannel::Connect(o.path, kToken + 1, 2 * kSecond);
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kPermissionDenied) << wrong.status();
  server.Stop();
}

// A store is shareable only when asked (a memfd, one open descriptor, per segment): a node
// without --shm-socket holds none, and a ShmServer over such a store refuses to start.
TEST(ShmShareableTest, OnlyAShareableStoreHoldsDescriptorsAndServesThePath) {
  NodeStore plain(uint64_t{8} << 20, uint64_t{4} << 20);
  for (const auto& seg : plain.Segments()) EXPECT_EQ(seg.fd, -1);
  ShmServer refused(&plain, {.path = SocketPath("plain"), .token = kToken});
  EXPECT_EQ(refused.Start().code(), absl::StatusCode::kFailedPrecondition);
  NodeStore shared(uint64_t{8} << 20, uint64_t{4} << 20, /*shareable=*/true);
  for (const auto& seg : shared.Segments()) EXPECT_GE(seg.fd, 0);
}

TEST_F(ShmPathTest, FallsBackToTcpWithoutAUsableSocket) {
  // A node advertising a path where nothing is.
  NodeStore store(uint64_t{8} << 20, uint64_t{4} << 20, /*shareable=*/true);
  DataServer absent(&store, {.threads = 1});
  absent.set_shm_socket(SocketPath("absent"), kToken);
  ASSERT_TRUE(absent.Start().ok());
  // And one whose path is another node's socket (token mismatch: that socket is this
  // fixture's node, with another token).
  DataServer other(&store, {.threads = 1});
  other.set_shm_socket(path_, kToken + 1);
  ASSERT_TRUE(other.Start().ok());
  for (DataServer* s : {&absent, &other}) {
    DataClient c("127.0.0.1:" + std::to_string(s->port()));
    EXPECT_FALSE(c.UsesSharedMemory());
    ASSERT_TRUE(c.Put({1, 1}, "over tcp").ok());
    std::vector<std::string> got;
    std::vector<absl::StatusCode> codes;
    ASSERT_TRUE(c.Get(std::vector<ObjectName>{{1, 1}}, &got, &codes).ok());
    EXPECT_EQ(got[0], "over tcp");
  }
  EXPECT_EQ(store.stats().objects, 1u);
  absent.Stop();
  other.Stop();
  // The socket goes away under a client that used it: the next calls go over TCP.
  DataClient c(address());
  ASSERT_TRUE(c.UsesSharedMemory());
  ASSERT_TRUE(c.Put({1, 2}, "before").ok());
  shm_->Stop();
  ASSERT_TRUE(c.Put({1, 2}, "after").ok());
  std::vector<std::string> got;
  std::vector<absl::StatusCode> codes;
  ASSERT_TRUE(c.Get(std::vector<ObjectName>{{1, 2}}, &got, &codes).ok());
  EXPECT_EQ(got[0], "after");
  EXPECT_FALSE(c.UsesSharedMemory());
}

TEST_F(ShmPathTest, StartRefusesAForeignFileAndALiveSocket) {
  ShmServerOptions o;
  o.path = path_;  // the fixture's live socket
  ShmServer twin(&store_, o);
  EXPECT_EQ(twin.Start().code(), absl::StatusCode::kAlreadyExists);
  o.path = SocketPath("file");
  FILE* f = std::fopen(o.path.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fclose(f);
  ShmServer on_file(&store_, o);
  EXPECT_EQ(on_file.Start().code(), absl::StatusCode::kFailedPrecondition);
  unlink(o.path.c_str());
  o.path = std::string(200, 'p');
  ShmServer long_path(&store_, o);
  EXPECT_EQ(long_path.Start().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ShmStoreClientTest, StoreClientUsesTheLocalNodeAndReadsTheSameBytes) {
  testing::KvCluster cluster;
  const std::string path = SocketPath("cluster");
  StorageNode& a = cluster.AddNode(1, "a", uint64_t{64} << 20, uint64_t{16} << 20, path);
  cluster.AddNode(2, "b");
  ASSERT_NE(a.shm_server(), nullptr);
  auto local = StoreClient::Connect(cluster.url(), {.master_timeout = 2 * kSecond,
                                                    .node_timeout = 2 * kSecond});
  auto tcp = StoreClient::Connect(cluster.url(), {.master_timeout = 2 * kSecond,
                                                  .node_timeout = 2 * kSecond,
                                                  .shared_memory = false});
  ASSERT_TRUE(local.ok() && tcp.ok());
  ASSERT_TRUE((*local)->master().CreateNamespace("m").ok());
  Rng rng(3);
  const std::string value = Bytes(rng, (1 << 20) + 17);
  const std::vector<BlockKey> run = {11, 12};
  const absl::Status put = (*local)->Put("m", run, value, 2);
  ASSERT_TRUE(put.ok()) << put;
  EXPECT_EQ(a.shm_server()->stats().puts, 1u);
  for (auto* c : {&*local, &*tcp}) {
    auto got = (*c)->Get("m", run[1]);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_TRUE(*got == value);
  }
  EXPECT_NE(a.MetricsText().find("myriad_kvnode_shm_ops_total{op=\"put\"} 1"), std::string::npos);
}

}  // namespace
}  // namespace myriad::kvstore
