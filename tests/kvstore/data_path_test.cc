// The storage node's data path on loopback: a DataServer over a NodeStore, the DataClient, and
// raw sockets sending what a broken or hostile peer would.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "kvstore/data_client.h"
#include "kvstore/data_server.h"
#include "kvstore/data_wire.h"
#include "kvstore/node_store.h"
#include "kv_cluster.h"

namespace myriad::kvstore {
namespace {

namespace asio = boost::asio;
using asio::ip::tcp;
using testing::WaitFor;

class DataPathTest : public ::testing::Test {
 protected:
  void SetUp() override {
    DataServerOptions o;
    o.threads = 1;
    o.max_body_bytes = (8 << 20) + 64;
    o.frame_timeout = 300 * kMillisecond;
    o.idle_timeout = 1 * kSecond;
    o.max_batch = 64;
    server_ = std::make_unique<DataServer>(&store_, o);
    ASSERT_TRUE(server_->Start().ok());
  }
  void TearDown() override { server_->Stop(); }
  std::string address() const { return "127.0.0.1:" + std::to_string(server_->port()); }

  // A blocking raw socket with a 3 s receive timeout, so a test never hangs.
  tcp::socket Raw() {
    tcp::socket s(io_);
    s.connect({asio::ip::make_address("127.0.0.1"), server_->port()});
    timeval tv{3, 0};
    setsockopt(s.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    return s;
  }
  static void Send(tcp::socket& s, const void* p, size_t n) { asio::write(s, asio::buffer(p, n)); }
  // Reads one reply: its header and body; false when the node closed the connection.
  static bool ReadReply(tcp::socket& s, wire::Header* h, std::string* body) {
    boost::system::error_code ec;
    asio::read(s, asio::buffer(h, sizeof *h), ec);
    if (ec) return false;
    if (h->body_bytes > (1 << 20)) return false;
    body->resize(h->body_bytes);
    asio::read(s, asio::buffer(*body), ec);
    return !ec;
  }
  static bool Closed(tcp::socket& s) {
    char c;
    boost::system::error_code ec;
    s.read_some(asio::buffer(&c, 1), ec);
    return ec == asio::error::eof || ec == asio::error::connection_reset;
  }

  NodeStore store_{uint64_t{32} << 20, uint64_t{16} << 20};
  std::unique_ptr<DataServer> server_;
  asio::io_context io_;
};

TEST_F(DataPathTest, PutBatchGetDeleteDropRoundTrip) {
  DataClient client(address());
  std::string a(1 << 20, 'a'), b(3000, 'b');
  for (size_t i = 0; i < a.size(); i += 4096) a[i] = static_cast<char>(i >> 12);
  ASSERT_TRUE(client.Put({1, 0xa}, a).ok());
  ASSERT_TRUE(client.Put({1, 0xb}, b).ok());
  ASSERT_TRUE(client.Put({2, 0xa}, "other namespace").ok());
  const std::vector<ObjectName> names = {{1, 0xa}, {1, 0xc}, {1, 0xb}, {2, 0xa}};
  std::vector<std::string> values;
  std::vector<absl::StatusCode> codes;
  ASSERT_TRUE(client.Get(names, &values, &codes).ok());
  EXPECT_EQ(codes[0], absl::StatusCode::kOk);
  EXPECT_EQ(codes[1], absl::StatusCode::kNotFound);
  EXPECT_EQ(values[0], a);
  EXPECT_EQ(values[2], b);
  EXPECT_EQ(values[3], "other namespace");
  auto deleted = client.Delete(std::vector<ObjectName>{{1, 0xb}, {1, 0xb}});
  ASSERT_TRUE(deleted.ok());
  EXPECT_EQ(*deleted, (std::vector<bool>{true, false}));
  auto dropped = client.DropNamespace(1);
  ASSERT_TRUE(dropped.ok());
  EXPECT_EQ(*dropped, 1u);
  EXPECT_EQ(store_.stats().objects, 1u);
  EXPECT_EQ(store_.stats().used_bytes, 15u);
  auto stats = client.Stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_NE(stats->find("\"puts\":3"), std::string::npos) << *stats;
}

TEST_F(DataPathTest, CopyToPushesToAnotherNode) {
  NodeStore other_store(8 << 20, 8 << 20);
  DataServer other(&other_store, {});
  ASSERT_TRUE(other.Start().ok());
  DataClient client(address());
  ASSERT_TRUE(client.Put({3, 7}, std::string(100'000, 'z')).ok());
  const std::string to = "127.0.0.1:" + std::to_string(other.port());
  ASSERT_TRUE(client.CopyTo({3, 7}, to).ok());
  DataClient reader(to);
  std::vector<std::string> values;
  std::vector<absl::StatusCode> codes;
  ASSERT_TRUE(reader.Get(std::vector<ObjectName>{{3, 7}}, &values, &codes).ok());
  EXPECT_EQ(values[0], std::string(100'000, 'z'));
  // Missing object and unreachable destination: clear errors, the connection still usable.
  absl::Status missing = client.CopyTo({3, 8}, to);
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound) << missing;
  absl::Status unreachable = client.CopyTo({3, 7}, "127.0.0.1:1");
  EXPECT_EQ(unreachable.code(), absl::StatusCode::kUnavailable) << unreachable;
  EXPECT_TRUE(client.Put({3, 9}, "still fine").ok());
  other.Stop();
}

TEST_F(DataPathTest, BadHeadersGetAnErrorFrameAndAClose) {
  struct Case {
    const char* what;
    wire::Header h;
    absl::StatusCode code;
    const char* field;
  };
  wire::Header bad_magic, bad_version, bad_op, oversize, reply_status;
  bad_magic.magic = 0x12345678;
  bad_version.version = 9;
  bad_op.op = 42;
  oversize.op = static_cast<uint8_t>(wire::Op::kPut);
  oversize.body_bytes = uint64_t{1} << 40;
  reply_status.op = static_cast<uint8_t>(wire::Op::kStats);
  reply_status.status = 3;
  const Case cases[] = {
      {"bad magic", bad_magic, absl::StatusCode::kInvalidArgument, "magic"},
      {"bad version", bad_version, absl::StatusCode::kInvalidArgument, "version"},
      {"unknown op", bad_op, absl::StatusCode::kInvalidArgument, "op"},
      {"oversize", oversize, absl::StatusCode::kResourceExhausted, "body_bytes"},
      {"status in a request", reply_status, absl::StatusCode::kInvalidArgument, "status"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    tcp::socket s = Raw();
    wire::Header h = c.h;
    h.request_id = 77;
    Send(s, &h, sizeof h);
    wire::Header reply;
    std::string message;
    ASSERT_TRUE(ReadReply(s, &reply, &message));
    EXPECT_EQ(reply.op, static_cast<uint8_t>(wire::Op::kError) | wire::kReplyBit);
    // Nothing of a frame with a wrong magic is trusted, its request id neither.
    EXPECT_EQ(reply.request_id, h.magic == wire::kMagic ? 77u : 0u);
    EXPECT_EQ(reply.status, static_cast<uint16_t>(c.code));
    EXPECT_NE(message.find(c.field), std::string::npos) << message;
    EXPECT_TRUE(Closed(s));
  }
  EXPECT_EQ(store_.stats().used_bytes, 0u);
  EXPECT_EQ(server_->stats().bad_frames, 5u);
}

TEST_F(DataPathTest, BadBodiesGetErrorReplies) {
  // A GET whose count does not match its length; a PUT whose size does not match its frame; a
  // GET above the batch limit.
  {
    tcp::socket s = Raw();
    wire::Header h;
    h.op = static_cast<uint8_t>(wire::Op::kGet);
    h.request_id = 5;
    h.body_bytes = 8 + 16;
    const uint32_t body[6] = {3, 0, 1, 0, 2, 0};  // claims 3 refs, carries 1
    Send(s, &h, sizeof h);
    Send(s, body, sizeof body);
    wire::Header reply;
    std::string message;
    ASSERT_TRUE(ReadReply(s, &reply, &message));
    EXPECT_EQ(reply.op, static_cast<uint8_t>(wire::Op::kGet) | wire::kReplyBit);
    EXPECT_EQ(reply.request_id, 5u);
    EXPECT_EQ(reply.status, static_cast<uint16_t>(absl::StatusCode::kInvalidArgument));
    EXPECT_NE(message.find("count"), std::string::npos) << message;
  }
  {
    tcp::socket s = Raw();
    wire::Header h;
    h.op = static_cast<uint8_t>(wire::Op::kPut);
    h.body_bytes = sizeof(wire::PutHead) + 10;
    const wire::PutHead head{1, 0, 2, 1'000'000};
    Send(s, &h, sizeof h);
    Send(s, &head, sizeof head);
    wire::Header reply;
    std::string message;
    ASSERT_TRUE(ReadReply(s, &reply, &message));
    EXPECT_NE(message.find("'size'"), std::string::npos) << message;
  }
  {
    tcp::socket s = Raw();
    wire::Header h;
    h.op = static_cast<uint8_t>(wire::Op::kPut);
    h.body_bytes = sizeof(wire::PutHead) + 10;
    const wire::PutHead head{1, 7, 2, 10};  // nonzero reserved field
    Send(s, &h, sizeof h);
    Send(s, &head, sizeof head);
    wire::Header reply;
    std::string message;
    ASSERT_TRUE(ReadReply(s, &reply, &message));
    EXPECT_NE(message.find("'reserved'"), std::string::npos) << message;
  }
  {
    tcp::socket s = Raw();
    wire::Header h;
    h.op = static_cast<uint8_t>(wire::Op::kGet);
    h.body_bytes = 8 + 16 * 1000;  // over max_batch = 64: refused before the body is read
    Send(s, &h, sizeof h);
    wire::Header reply;
    std::string message;
    ASSERT_TRUE(ReadReply(s, &reply, &message));
    EXPECT_NE(message.find("body_bytes"), std::string::npos) << message;
  }
  EXPECT_EQ(store_.stats().used_bytes, 0u);
  DataClient client(address());
  EXPECT_TRUE(client.Put({1, 1}, "ok").ok());
}

// COPY_TO's flags: only kCopyChecksum, and with it the 8 checksum bytes after the address.
TEST_F(DataPathTest, CopyToWithUnknownFlagsOrAMissingChecksumIsRefused) {
  const std::string to = "127.0.0.1:1";
  for (const uint32_t flags : {uint32_t{2}, wire::kCopyChecksum}) {
    tcp::socket s = Raw();
    const wire::CopyHead head{{3, 0, 7}, static_cast<uint32_t>(to.size()), flags};
    wire::Header h;
    h.op = static_cast<uint8_t>(wire::Op::kCopyTo);
    h.body_bytes = sizeof head + to.size();  // never the checksum
    Send(s, &h, sizeof h);
    Send(s, &head, sizeof head);
    Send(s, to.data(), to.size());
    wire::Header reply;
    std::string message;
    ASSERT_TRUE(ReadReply(s, &reply, &message)) << "flags " << flags;
    EXPECT_EQ(reply.status, static_cast<uint16_t>(absl::StatusCode::kInvalidArgument));
    EXPECT_NE(message.find("'flags' 0 or 1"), std::string::npos) << message;
    EXPECT_NE(message.find("8-byte checksum"), std::string::npos) << message;
  }
}

TEST_F(DataPathTest, TruncatedAndStalledFramesAreCutOffWithoutLeaking) {
  // Half a header, then gone.
  {
    tcp::socket s = Raw();
    wire::Header h;
    h.op = static_cast<uint8_t>(wire::Op::kPut);
    Send(s, &h, 10);
  }
  // A put that stops mid-payload and closes: the reservation is given back.
  {
    tcp::socket s = Raw();
    wire::Header h;
    h.op = static_cast<uint8_t>(wire::Op::kPut);
    h.body_bytes = sizeof(wire::PutHead) + 100'000;
    const wire::PutHead head{1, 0, 9, 100'000};
    Send(s, &h, sizeof h);
    Send(s, &head, sizeof head);
    const std::string part(5000, 'p');
    Send(s, part.data(), part.size());
  }
  // A put that stalls mid-payload and stays connected: cut after the frame timeout (300 ms).
  tcp::socket stalled = Raw();
  wire::Header h;
  h.op = static_cast<uint8_t>(wire::Op::kPut);
  h.body_bytes = sizeof(wire::PutHead) + 100'000;
  const wire::PutHead head{1, 0, 10, 100'000};
  Send(stalled, &h, sizeof h);
  Send(stalled, &head, sizeof head);
  Send(stalled, "abc", 3);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(Closed(stalled));
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_GT(waited, 0.2);
  EXPECT_LT(waited, 2.5);
  EXPECT_TRUE(WaitFor([&] { return store_.stats().used_bytes == 0 && server_->connections() == 0; }));
  EXPECT_GE(server_->stats().timeouts, 1u);
  EXPECT_GE(server_->stats().truncated, 2u);
  DataClient client(address());
  ASSERT_TRUE(client.Put({1, 10}, "after the stall").ok());
  EXPECT_EQ(store_.stats().objects, 1u);
}

TEST_F(DataPathTest, PutWithoutRoomIsRefusedAndTheConnectionStaysUsable) {
  DataClient client(address());
  const std::string big(6 << 20, 'q');
  int stored = 0;
  absl::Status st;
  for (uint64_t k = 0; k < 10 && st.ok(); ++k) {
    st = client.Put({4, k}, big);
    if (st.ok()) ++stored;
  }
  EXPECT_EQ(stored, 4);  // two 6 MiB objects per 16 MiB segment
  EXPECT_EQ(st.code(), absl::StatusCode::kResourceExhausted) << st;
  EXPECT_TRUE(client.Put({4, 100}, "small still fits").ok());
}

TEST_F(DataPathTest, SilentConnectionIsClosedAfterTheIdleTimeout) {
  tcp::socket silent = Raw();
  const auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(Closed(silent));
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_GT(waited, 0.8);
  EXPECT_LT(waited, 2.9);
}

// Idle connections up to the cap (1,024 by default) made every get fail until the 5-minute
// idle timeout; now a new connection at the cap closes the one idle the longest.
TEST(DataServerCapTest, IdleConnectionsAtTheCapAreShedForANewClient) {
  NodeStore store(8 << 20, 8 << 20);
  DataServerOptions o;
  o.threads = 1;
  o.max_connections = 16;
  DataServer server(&store, o);
  ASSERT_TRUE(server.Start().ok());
  const std::string address = "127.0.0.1:" + std::to_string(server.port());
  {
    DataClient writer(address);
    ASSERT_TRUE(writer.Put({1, 1}, "bytes").ok());
  }
  ASSERT_TRUE(WaitFor([&] { return server.connections() == 0; }));
  asio::io_context io;
  std::vector<tcp::socket> idle;
  for (int i = 0; i < o.max_connections; ++i) {
    idle.emplace_back(io);
    idle.back().connect({asio::ip::make_address("127.0.0.1"), server.port()});
  }
  ASSERT_TRUE(WaitFor([&] { return server.connections() == o.max_connections; }));
  const auto start = std::chrono::steady_clock::now();
  DataClient reader(address, {.timeout = 2 * kSecond});
  std::vector<std::string> values;
  std::vector<absl::StatusCode> codes;
  absl::Status st = reader.Get(std::vector<ObjectName>{{1, 1}}, &values, &codes);
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ(values[0], "bytes");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1));
  EXPECT_GE(server.stats().connections_shed, 1u);
  EXPECT_EQ(server.stats().connections_refused, 0u);
  EXPECT_LE(server.connections(), o.max_connections);
  server.Stop();
}

TEST(DataClientTest, KeptAliveConnectionToARestartedNodeIsRetriedOnce) {
  NodeStore store(8 << 20, 8 << 20);
  auto server = std::make_unique<DataServer>(&store, DataServerOptions{});
  ASSERT_TRUE(server->Start().ok());
  const uint16_t port = server->port();
  DataClient client("127.0.0.1:" + std::to_string(port));
  ASSERT_TRUE(client.Put({1, 1}, "before").ok());
  server->Stop();
  server.reset();
  DataServerOptions again;
  again.port = port;
  server = std::make_unique<DataServer>(&store, again);
  ASSERT_TRUE(server->Start().ok());
  // The client's connection died with the old server: the call reconnects instead of failing.
  EXPECT_TRUE(client.Put({1, 2}, "after").ok());
  EXPECT_EQ(store.stats().objects, 2u);
}

TEST(DataClientTest, UnreachableNodeIsUnavailableNotAHang) {
  DataClient client("127.0.0.1:1", {.timeout = 2 * kSecond});
  absl::Status st = client.Put({0, 1}, "x");
  EXPECT_EQ(st.code(), absl::StatusCode::kUnavailable) << st;
  DataClient bad("no-port-here");
  EXPECT_EQ(bad.Put({0, 1}, "x").code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace myriad::kvstore

namespace myriad::kvstore {
namespace {

// PutMany sends every frame before reading a reply: the objects all land, a node's refusal of
// one (no room) is that object's status, and the connection goes on serving the rest.
TEST(DataPathPutManyTest, PipelinesAndReportsEachObject) {
  // The fixture's 300 ms frame timeout would cut an 8 MiB frame on a loaded machine.
  NodeStore store(uint64_t{32} << 20, uint64_t{16} << 20);
  DataServer server(&store, {.threads = 1, .max_body_bytes = (8 << 20) + 64});
  ASSERT_TRUE(server.Start().ok());
  DataClient client("127.0.0.1:" + std::to_string(server.port()));
  std::vector<std::string> bytes;
  std::vector<ObjectName> names;
  for (uint64_t i = 0; i < 3; ++i) bytes.push_back(std::string(1 << 20, static_cast<char>('a' + i)));
  for (uint64_t i = 0; i < 4; ++i) bytes.push_back(std::string(8 << 20, static_cast<char>('p' + i)));
  bytes.push_back("the tail");
  for (uint64_t i = 0; i < bytes.size(); ++i) names.push_back({3, 100 + i});
  const std::vector<std::string_view> values(bytes.begin(), bytes.end());
  std::vector<absl::Status> statuses;
  const absl::Status call = client.PutMany(names, values, &statuses);
  ASSERT_TRUE(call.ok()) << call;
  ASSERT_EQ(statuses.size(), names.size());
  // 32 MiB in two 16 MiB segments: two of the 8 MiB objects fit, the others find no room.
  size_t refused = 0, stored = 0;
  for (const absl::Status& st : statuses) {
    if (st.ok()) ++stored;
    if (absl::IsResourceExhausted(st)) ++refused;
  }
  EXPECT_GE(refused, 1u);
  EXPECT_EQ(stored + refused, names.size());
  EXPECT_TRUE(statuses.back().ok()) << statuses.back();
  std::vector<std::string> got;
  std::vector<absl::StatusCode> codes;
  ASSERT_TRUE(client.Get(names, &got, &codes).ok());
  for (size_t i = 0; i < names.size(); ++i) {
    EXPECT_EQ(codes[i] == absl::StatusCode::kOk, statuses[i].ok()) << i;
    if (statuses[i].ok()) {
      EXPECT_EQ(got[i], bytes[i]) << i;
    }
  }
  EXPECT_EQ(server.stats().puts, stored);
}

// A PutMany that never reaches a node reports every object failed, none written.
TEST(DataPathPutManyTest, NoNodeNoObjectReportedWritten) {
  DataClient client("127.0.0.1:1", {.timeout = 1 * kSecond});
  const std::vector<ObjectName> names = {{1, 1}, {1, 2}};
  const std::vector<std::string_view> values = {"a", "b"};
  std::vector<absl::Status> statuses;
  EXPECT_FALSE(client.PutMany(names, values, &statuses).ok());
  ASSERT_EQ(statuses.size(), 2u);
  EXPECT_EQ(statuses[0].code(), absl::StatusCode::kUnavailable) << statuses[0];
  EXPECT_EQ(statuses[1].code(), absl::StatusCode::kUnavailable) << statuses[1];
}

}  // namespace
}  // namespace myriad::kvstore
