// DataServer: one coroutine per connection on a strand, plus a watchdog coroutine that closes
// the socket when the connection's deadline passes (a stalled or silent peer).
#include "kvstore/data_server.h"

#include <fmt/format.h>

#include <array>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <chrono>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "core/steady_now.h"
#include "absl/container/flat_hash_set.h"
#include "kvstore/auth.h"
#include "kvstore/checksum.h"
#include "kvstore/data_conn.h"
#include "kvstore/data_wire.h"

namespace myriad::kvstore {

namespace asio = boost::asio;
using asio::awaitable;

using asio::ip::tcp;
using wire::Header;
using wire::Op;

struct DataServer::Impl {
  Impl(NodeStore* s, DataServerOptions o) : store(s), options(std::move(o)) {}

  NodeStore* store;
  DataServerOptions options;
  asio::io_context io;
  std::optional<tcp::acceptor> acceptor;
  std::vector<std::thread> threads;
  std::function<void()> on_no_room;
  std::function<bool(std::string_view)> copy_allowed;
  std::string shm_path;
  uint64_t shm_token = 0;
  std::atomic<int> open{0};
  // Every open connection, for shedding the longest idle at the cap.
  std::mutex conns_mu;
  absl::flat_hash_set<std::shared_ptr<Conn>> conns;
  std::atomic<bool> started{false};
  uint16_t port = 0;

  struct Counters {
    std::atomic<uint64_t> accepted{0}, refused{0}, shed{0}, puts{0}, gets{0}, get_objects{0},
        get_misses{0}, deletes{0}, copies{0}, bytes_in{0}, bytes_out{0}, bad_frames{0},
        errors{0}, timeouts{0}, truncated{0}, copy_failures{0}, unauthenticated{0};
  } c;

  awaitable<void> Accept();
  // Closes the connection that has waited longest for its next frame; false when none waits.
  bool ShedIdlest();
  awaitable<void> Session(std::shared_ptr<Conn> conn);
  // Serves one request whose header is valid; false when the connection must close.
  awaitable<bool> Serve(Conn& conn, const Header& h);
  // An AUTH frame, or any frame while the connection has not presented the secret; false when
  // the connection must close (every refusal closes it).
  awaitable<bool> Auth(Conn& conn, const Header& h, bool* authed);
  awaitable<bool> Put(Conn& conn, const Header& h);
  awaitable<bool> Get(Conn& conn, const Header& h, std::span<const wire::ObjectRef> refs);
  awaitable<bool> CopyTo(Conn& conn, const Header& h, std::span<const uint8_t> body);
  awaitable<bool> Reply(Conn& conn, const Header& req, std::string_view body);
  // An error reply to `req` (op|reply bit, or kError for an invalid header); true when sent.
  awaitable<bool> Fail(Conn& conn, const Header& req, const absl::Status& st, bool bad_header);
};

awaitable<void> DataServer::Impl::Accept() {
  for (;;) {
    tcp::socket socket(asio::make_strand(io));
    auto [ec] = co_await acceptor->async_accept(socket, kTuple);
    if (ec) {
      if (!acceptor->is_open()) co_return;
      // Out of descriptors and the like: do not spin; the open connections go on.
      asio::steady_timer pause(io, std::chrono::milliseconds(10));
      co_await pause.async_wait(kTuple);
      continue;
    }
    c.accepted.fetch_add(1, std::memory_order_relaxed);
    if (open.load() >= options.max_connections && !ShedIdlest()) {
      c.refused.fetch_add(1, std::memory_order_relaxed);
      boost::system::error_code closed;
      socket.close(closed);
      continue;
    }
    boost::system::error_code ignored;  // no throwing overloads inside the coroutines
    socket.set_option(tcp::no_delay(true), ignored);
    SetBuffers(socket, options.socket_buffer_bytes);
    auto conn = std::make_shared<Conn>(std::move(socket));
    open.fetch_add(1);
    {
      std::lock_guard lock(conns_mu);
      conns.insert(conn);
    }
    asio::co_spawn(conn->socket.get_executor(), Watchdog(conn, &c.timeouts), asio::detached);
    asio::co_spawn(conn->socket.get_executor(), Session(conn), asio::detached);
  }
}

awaitable<void> DataServer::Impl::Session(std::shared_ptr<Conn> conn) {
  std::array<uint8_t, wire::kHeaderBytes> hb{};
  bool authed = options.auth_token.empty();
  for (;;) {
    conn->SetDeadline(options.idle_timeout);
    conn->idle_since.store(std::max<int64_t>(1, SteadyNow()), std::memory_order_relaxed);
    auto [ec, n] = co_await conn->socket.async_read_some(asio::buffer(hb), kTuple);
    conn->idle_since.store(0, std::memory_order_relaxed);
    if (ec) break;
    conn->SetDeadline(options.frame_timeout);
    if (n < hb.size()) {
      auto [ec2, m] =
          co_await asio::async_read(conn->socket, asio::buffer(hb.data() + n, hb.size() - n), kTuple);
      if (ec2) {
        c.truncated.fetch_add(1, std::memory_order_relaxed);
        break;
      }
    }
    const Header h = wire::Load<Header>(hb.data());
    if (absl::Status st = wire::ValidateRequest(h, options.max_body_bytes); !st.ok()) {
      co_await Fail(*conn, h, st, true);
      break;
    }
    if (h.op == static_cast<uint8_t>(Op::kAuth) || !authed) {
      if (!co_await Auth(*conn, h, &authed)) break;
      continue;
    }
    if (!co_await Serve(*conn, h)) break;
  }
  conn->Close();
  {
    std::lock_guard lock(conns_mu);
    conns.erase(conn);
  }
  open.fetch_sub(1);
}

bool DataServer::Impl::ShedIdlest() {
  std::shared_ptr<Conn> idlest;
  int64_t oldest = 0;
  {
    std::lock_guard lock(conns_mu);
    for (const std::shared_ptr<Conn>& conn : conns) {
      const int64_t since = conn->idle_since.load(std::memory_order_relaxed);
      if (since != 0 && (oldest == 0 || since < oldest)) {
        oldest = since;
        idlest = conn;
      }
    }
    if (idlest == nullptr) return false;
    // Not shed twice: its session leaves the set only once it has seen the close.
    idlest->idle_since.store(0, std::memory_order_relaxed);
  }
  // The socket belongs to its strand: close it there. The session ends on the error and
  // releases its slot.
  asio::post(idlest->socket.get_executor(), [idlest] { idlest->Close(); });
  c.shed.fetch_add(1, std::memory_order_relaxed);
  return true;
}

awaitable<bool> DataServer::Impl::Auth(Conn& conn, const Header& h, bool* authed) {
  if (h.op != static_cast<uint8_t>(Op::kAuth)) {
    c.unauthenticated.fetch_add(1, std::memory_order_relaxed);
    co_await Fail(conn, h,
                  absl::UnauthenticatedError(fmt::format(
                      "{} refused: this node requires the cluster's token first (an AUTH frame; "
                      "--auth-token-file or MYRIAD_KVSTORE_TOKEN)",
                      wire::OpName(h.op))),
                  false);
    co_return false;
  }
  if (h.body_bytes == 0 || h.body_bytes > kMaxAuthTokenBytes) {
    co_await Fail(conn, h,
                  absl::InvalidArgumentError(fmt::format(
                      "bad auth: field 'body_bytes' is {}, a token has 1 to {} bytes",
                      h.body_bytes, kMaxAuthTokenBytes)),
                  false);
    co_return false;
  }
  std::string token(h.body_bytes, '\0');
  auto [ec, n] = co_await asio::async_read(conn.socket, asio::buffer(token), kTuple);
  if (ec) {
    c.truncated.fetch_add(1, std::memory_order_relaxed);
    co_return false;
  }
  // A node without a secret accepts any: clients configured with one still talk to it.
  if (!options.auth_token.empty() && !TokensEqual(options.auth_token, token)) {
    c.unauthenticated.fetch_add(1, std::memory_order_relaxed);
    co_await Fail(conn, h, absl::UnauthenticatedError("auth: wrong token"), false);
    co_return false;
  }
  *authed = true;
  co_return co_await Reply(conn, h, {});
}

awaitable<bool> DataServer::Impl::Fail(Conn& conn, const Header& req, const absl::Status& st,
                                       bool bad_header) {
  c.errors.fetch_add(1, std::memory_order_relaxed);
  if (bad_header || st.code() == absl::StatusCode::kInvalidArgument) {
    c.bad_frames.fetch_add(1, std::memory_order_relaxed);
  }
  std::string message;
  const Header r = wire::ErrorReply(req, st, bad_header, &message);
  const std::array<asio::const_buffer, 2> out{asio::buffer(&r, sizeof r), asio::buffer(message)};
  auto [ec, n] = co_await asio::async_write(conn.socket, out, kTuple);
  co_return !ec;
}

awaitable<bool> DataServer::Impl::Reply(Conn& conn, const Header& req, std::string_view body) {
  const Header r = wire::ReplyHeader(req, body.size());
  const std::array<asio::const_buffer, 2> out{asio::buffer(&r, sizeof r), asio::buffer(body)};
  auto [ec, n] = co_await asio::async_write(conn.socket, out, kTuple);
  co_return !ec;
}

awaitable<bool> DataServer::Impl::Serve(Conn& conn, const Header& h) {
  const auto op = static_cast<Op>(h.op);
  if (op == Op::kPut) co_return co_await Put(conn, h);
  // Every other body is small: bound it by the op before reading it.
  uint64_t max = 0;
  switch (op) {
    case Op::kGet:
    case Op::kDelete: max = sizeof(wire::CountHead) + uint64_t{options.max_batch} * 16; break;
    case Op::kDropNamespace: max = 8; break;
    case Op::kCopyTo: max = sizeof(wire::CopyHead) + wire::kMaxAddressBytes + 8; break;
    default: max = 0; break;
  }
  if (h.body_bytes > max) {
    co_await Fail(conn, h,
                  absl::InvalidArgumentError(fmt::format(
                      "bad frame: field 'body_bytes' is {}, a {} body is at most {} bytes",
                      h.body_bytes, wire::OpName(h.op), max)),
                  false);
    co_return false;
  }
  std::vector<uint8_t> body(h.body_bytes);
  if (!body.empty()) {
    auto [ec, n] = co_await asio::async_read(conn.socket, asio::buffer(body), kTuple);
    if (ec) {
      c.truncated.fetch_add(1, std::memory_order_relaxed);
      co_return false;
    }
  }
  if (op == Op::kStats) {
    const NodeStoreStats s = store->stats();
    const nlohmann::json j = {
        {"capacity_bytes", s.capacity_bytes}, {"used_bytes", s.used_bytes},
        {"arena_bytes", s.arena_bytes},       {"objects", s.objects},
        {"segments", s.segments},             {"allocation_failures", s.allocation_failures},
        {"puts", c.puts.load()},              {"gets", c.gets.load()},
        {"bytes_in", c.bytes_in.load()},      {"bytes_out", c.bytes_out.load()},
        {"bad_frames", c.bad_frames.load()},  {"errors", c.errors.load()},
        {"timeouts", c.timeouts.load()}};
    co_return co_await Reply(conn, h, j.dump());
  }
  if (op == Op::kShmInfo) {
    std::string out(16 + shm_path.size(), '\0');
    const auto len = static_cast<uint32_t>(shm_path.size());
    std::memcpy(out.data(), &shm_token, 8);
    std::memcpy(out.data() + 8, &len, 4);
    std::memcpy(out.data() + 16, shm_path.data(), shm_path.size());
    co_return co_await Reply(conn, h, out);
  }
  if (op == Op::kDropNamespace) {
    if (body.size() != 8 || wire::Load<uint32_t>(body.data() + 4) != 0) {
      co_await Fail(conn, h,
                    absl::InvalidArgumentError(
                        "bad drop_namespace body: 8 bytes, namespace and a 'reserved' 0"),
                    false);
      co_return false;
    }
    const uint64_t freed = store->DropNamespace(wire::Load<uint32_t>(body.data()));
    co_return co_await Reply(conn, h, std::string_view(reinterpret_cast<const char*>(&freed), 8));
  }
  if (op == Op::kCopyTo) co_return co_await CopyTo(conn, h, body);
  // GET or DELETE: a count and that many references.
  const auto count = body.size() >= 8 ? wire::Load<wire::CountHead>(body.data()).count : 0;
  if (body.size() < 8 || count == 0 || body.size() != 8 + uint64_t{count} * 16) {
    co_await Fail(conn, h,
                  absl::InvalidArgumentError(fmt::format(
                      "bad {} body: {} bytes do not hold a nonzero count and that many 16-byte "
                      "object references",
                      wire::OpName(h.op), body.size())),
                  false);
    co_return false;
  }
  std::vector<wire::ObjectRef> refs(count);
  std::memcpy(refs.data(), body.data() + 8, count * sizeof(wire::ObjectRef));
  bool reserved = wire::Load<wire::CountHead>(body.data()).reserved != 0;
  for (const wire::ObjectRef& r : refs) reserved = reserved || r.reserved != 0;
  if (reserved) {
    co_await Fail(conn, h, absl::InvalidArgumentError(fmt::format(
                               "bad {} body: field 'reserved' must be 0", wire::OpName(h.op))),
                  false);
    co_return false;
  }
  if (op == Op::kGet) co_return co_await Get(conn, h, refs);
  c.deletes.fetch_add(count, std::memory_order_relaxed);
  std::vector<uint32_t> out(2 + count);
  out[0] = count;
  for (uint32_t i = 0; i < count; ++i) {
    const bool gone = store->Delete({refs[i].ns, refs[i].key});
    out[2 + i] = gone ? 0 : static_cast<uint32_t>(absl::StatusCode::kNotFound);
  }
  co_return co_await Reply(
      conn, h, std::string_view(reinterpret_cast<const char*>(out.data()), out.size() * 4));
}

awaitable<bool> DataServer::Impl::Put(Conn& conn, const Header& h) {
  if (h.body_bytes < sizeof(wire::PutHead)) {
    co_await Fail(conn, h, absl::InvalidArgumentError("bad put: body shorter than its 24-byte head"),
                  false);
    co_return false;
  }
  wire::PutHead head;
  auto [ec, n] = co_await asio::async_read(conn.socket, asio::buffer(&head, sizeof head), kTuple);
  if (ec) {
    c.truncated.fetch_add(1, std::memory_order_relaxed);
    co_return false;
  }
  if (head.reserved != 0) {
    co_await Fail(conn, h, absl::InvalidArgumentError("bad put: field 'reserved' must be 0"), false);
    co_return false;
  }
  if (head.size != h.body_bytes - sizeof head) {
    co_await Fail(conn, h,
                  absl::InvalidArgumentError(fmt::format(
                      "bad put: field 'size' is {} but the frame carries {} payload bytes",
                      head.size, h.body_bytes - sizeof head)),
                  false);
    co_return false;
  }
  absl::StatusOr<Extent> room = store->Reserve({head.ns, head.key}, head.size);
  if (!room.ok()) {
    if (room.status().code() == absl::StatusCode::kResourceExhausted && on_no_room) on_no_room();
    // Drain the payload through a small buffer so the connection stays usable.
    std::vector<uint8_t> sink(64 << 10);
    for (uint64_t left = head.size; left > 0;) {
      const size_t chunk = std::min<uint64_t>(left, sink.size());
      auto [e, m] = co_await asio::async_read(conn.socket, asio::buffer(sink.data(), chunk), kTuple);
      if (e) co_return false;
      left -= chunk;
    }
    co_return co_await Fail(conn, h, room.status(), false);
  }
  auto [e, m] =
      co_await asio::async_read(conn.socket, asio::buffer(room->data, room->size), kWhole, kTuple);
  if (e) {
    store->Abort(*room);
    c.truncated.fetch_add(1, std::memory_order_relaxed);
    co_return false;
  }
  store->Commit(*room);
  c.puts.fetch_add(1, std::memory_order_relaxed);
  c.bytes_in.fetch_add(head.size, std::memory_order_relaxed);
  co_return co_await Reply(conn, h, {});
}

awaitable<bool> DataServer::Impl::Get(Conn& conn, const Header& h,
                                      std::span<const wire::ObjectRef> refs) {
  c.gets.fetch_add(1, std::memory_order_relaxed);
  c.get_objects.fetch_add(refs.size(), std::memory_order_relaxed);
  std::vector<uint8_t> table(sizeof(wire::CountHead) + refs.size() * sizeof(wire::GetItem));
  const wire::CountHead count{static_cast<uint32_t>(refs.size()), 0};
  std::memcpy(table.data(), &count, sizeof count);
  std::vector<Extent> pinned;
  pinned.reserve(refs.size());
  uint64_t payload = 0;
  for (size_t i = 0; i < refs.size(); ++i) {
    wire::GetItem item;
    if (std::optional<Extent> e = store->Pin({refs[i].ns, refs[i].key})) {
      item.size = e->size;
      payload += e->size;
      pinned.push_back(*e);
    } else {
      item.status = static_cast<uint32_t>(absl::StatusCode::kNotFound);
      c.get_misses.fetch_add(1, std::memory_order_relaxed);
    }
    std::memcpy(table.data() + sizeof count + i * sizeof item, &item, sizeof item);
  }
  Header r;
  r.op = static_cast<uint8_t>(h.op | wire::kReplyBit);
  r.request_id = h.request_id;
  r.body_bytes = table.size() + payload;
  std::vector<asio::const_buffer> out;
  out.reserve(2 + pinned.size());
  out.push_back(asio::buffer(&r, sizeof r));
  out.push_back(asio::buffer(table));
  for (const Extent& e : pinned) out.push_back(asio::buffer(e.data, e.size));
  // Scatter/gather: the payloads go from the segments to the socket, no copy in between.
  conn.SetDeadline(options.frame_timeout + static_cast<Nanos>(payload / 100));
  auto [ec, n] = co_await asio::async_write(conn.socket, out, kWhole, kTuple);
  for (const Extent& e : pinned) store->Unpin(e);
  if (!ec) c.bytes_out.fetch_add(payload, std::memory_order_relaxed);
  co_return !ec;
}

awaitable<bool> DataServer::Impl::CopyTo(Conn& conn, const Header& h,
                                         std::span<const uint8_t> body) {
  c.copies.fetch_add(1, std::memory_order_relaxed);
  const auto head = body.size() >= sizeof(wire::CopyHead)
                        ? wire::Load<wire::CopyHead>(body.data())
                        : wire::CopyHead{};
  const size_t checksum_bytes = (head.flags & wire::kCopyChecksum) ? sizeof(uint64_t) : 0;
  if (body.size() < sizeof head || head.address_bytes == 0 ||
      body.size() != sizeof head + head.address_bytes + checksum_bytes ||
      (head.flags & ~wire::kCopyChecksum) != 0 || head.object.reserved != 0) {
    co_await Fail(conn, h,
                  absl::InvalidArgumentError(
                      "bad copy_to body: a 24-byte head ('reserved' 0, 'flags' 0 or 1), "
                      "'address_bytes' of address, and with flag 1 an 8-byte checksum"),
                  false);
    co_return false;
  }
  const uint64_t checksum =
      checksum_bytes != 0
          ? wire::Load<uint64_t>(body.data() + sizeof head + head.address_bytes)
          : 0;
  const std::string address(reinterpret_cast<const char*>(body.data()) + sizeof head,
                            head.address_bytes);
  if (copy_allowed && !copy_allowed(address)) {
    c.copy_failures.fetch_add(1, std::memory_order_relaxed);
    co_return co_await Fail(conn, h,
                            absl::PermissionDeniedError(fmt::format(
                                "copy_to: '{}' is not the address of a storage node registered "
                                "with the master",
                                address)),
                            false);
  }
  std::optional<Extent> pinned = store->Pin({head.object.ns, head.object.key});
  if (!pinned) {
    c.copy_failures.fetch_add(1, std::memory_order_relaxed);
    co_return co_await Fail(conn, h,
                            absl::NotFoundError(fmt::format(
                                "copy_to: this node holds no object {:016x} in namespace {}",
                                head.object.key, head.object.ns)),
                            false);
  }
  if (checksum != 0 &&
      ObjectChecksum({reinterpret_cast<const char*>(pinned->data), pinned->size}) != checksum) {
    store->Unpin(*pinned);
    c.copy_failures.fetch_add(1, std::memory_order_relaxed);
    co_return co_await Fail(conn, h,
                            absl::DataLossError(fmt::format(
                                "copy_to: this node's bytes of object {:016x} in namespace {} do "
                                "not match its checksum {:016x}; nothing was pushed",
                                head.object.key, head.object.ns, checksum)),
                            false);
  }
  // Push: a PUT frame gathered from the pinned segment bytes, on a connection of its own.
  auto out = std::make_shared<Conn>(tcp::socket(conn.socket.get_executor()));
  asio::co_spawn(out->socket.get_executor(), Watchdog(out, nullptr), asio::detached);
  out->SetDeadline(options.copy_timeout);
  absl::Status st = co_await ConnectTo(*out, address);
  if (st.ok()) st = co_await Authenticate(*out, options.auth_token, h.request_id);
  if (st.ok()) {
    Header put;
    put.op = static_cast<uint8_t>(Op::kPut);
    put.request_id = h.request_id;
    put.body_bytes = sizeof(wire::PutHead) + pinned->size;
    const wire::PutHead ph{head.object.ns, 0, head.object.key, pinned->size};
    const std::array<asio::const_buffer, 3> frame{asio::buffer(&put, sizeof put),
                                                  asio::buffer(&ph, sizeof ph),
                                                  asio::buffer(pinned->data, pinned->size)};
    auto [ec, n] = co_await asio::async_write(out->socket, frame, kWhole, kTuple);
    if (ec) {
      st = absl::UnavailableError(
          fmt::format("copy_to {}: sending the object failed: {}", address, ec.message()));
    } else {
      Header reply;
      st = co_await ReadReply(*out, put.op, put.request_id, wire::kMaxMessageBytes, &reply);
    }
  }
  store->Unpin(*pinned);
  out->Close();
  if (!st.ok()) {
    c.copy_failures.fetch_add(1, std::memory_order_relaxed);
    co_return co_await Fail(conn, h, st, false);
  }
  c.bytes_out.fetch_add(pinned->size, std::memory_order_relaxed);
  co_return co_await Reply(conn, h, {});
}

DataServer::DataServer(NodeStore* store, DataServerOptions options)
    : impl_(std::make_unique<Impl>(store, std::move(options))) {}

DataServer::~DataServer() { Stop(); }

absl::Status DataServer::Start() {
  boost::system::error_code ec;
  const auto address = asio::ip::make_address(impl_->options.address, ec);
  if (ec) {
    return absl::InvalidArgumentError(
        fmt::format("data server: bad listen address '{}'", impl_->options.address));
  }
  tcp::acceptor acceptor(impl_->io);
  const tcp::endpoint endpoint(address, impl_->options.port);
  acceptor.open(endpoint.protocol(), ec);
  if (!ec) acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) acceptor.bind(endpoint, ec);
  if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return absl::UnavailableError(fmt::format("data server: cannot listen on {}:{}: {}",
                                              impl_->options.address, impl_->options.port,
                                              ec.message()));
  }
  impl_->port = acceptor.local_endpoint().port();
  impl_->acceptor.emplace(std::move(acceptor));
  asio::co_spawn(impl_->io, impl_->Accept(), asio::detached);
  for (int i = 0; i < std::max(1, impl_->options.threads); ++i) {
    impl_->threads.emplace_back([this] { impl_->io.run(); });
  }
  impl_->started = true;
  return absl::OkStatus();
}

void DataServer::Stop() {
  if (!impl_->started.exchange(false)) return;
  asio::post(impl_->io, [this] {
    boost::system::error_code ignored;
    impl_->acceptor->close(ignored);
  });
  impl_->io.stop();
  for (std::thread& t : impl_->threads) t.join();
  impl_->threads.clear();
}

uint16_t DataServer::port() const { return impl_->port; }
int DataServer::connections() const { return impl_->open.load(); }
void DataServer::set_on_no_room(std::function<void()> f) { impl_->on_no_room = std::move(f); }
void DataServer::set_copy_destinations(std::function<bool(std::string_view)> allowed) {
  impl_->copy_allowed = std::move(allowed);
}
void DataServer::set_shm_socket(std::string path, uint64_t token) {
  impl_->shm_path = std::move(path);
  impl_->shm_token = token;
}

DataServerStats DataServer::stats() const {
  const Impl::Counters& c = impl_->c;
  DataServerStats s;
  s.connections_accepted = c.accepted.load();
  s.connections_refused = c.refused.load();
  s.connections_shed = c.shed.load();
  s.puts = c.puts.load();
  s.gets = c.gets.load();
  s.get_objects = c.get_objects.load();
  s.get_misses = c.get_misses.load();
  s.deletes = c.deletes.load();
  s.copies = c.copies.load();
  s.bytes_in = c.bytes_in.load();
  s.bytes_out = c.bytes_out.load();
  s.bad_frames = c.bad_frames.load();
  s.errors = c.errors.load();
  s.timeouts = c.timeouts.load();
  s.truncated = c.truncated.load();
  s.copy_failures = c.copy_failures.load();
  s.unauthenticated = c.unauthenticated.load();
  return s;
}

}  // namespace myriad::kvstore
