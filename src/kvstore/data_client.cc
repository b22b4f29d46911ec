#include "kvstore/data_client.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <functional>
#include <optional>

#include "kvstore/data_conn.h"
#include "kvstore/data_wire.h"
#include "kvstore/shm_client.h"

namespace myriad::kvstore {

namespace asio = boost::asio;
using asio::awaitable;
using asio::ip::tcp;
using wire::Header;
using wire::Op;

struct DataClient::Impl {
  Impl(std::string a, DataClientOptions o)
      : address(std::move(a)), options(o), conn(tcp::socket(io)) {}

  // Runs one call (a coroutine) within the timeout, reconnecting first when needed and once
  // more when a kept-alive connection turns out to have been closed by the node.
  absl::Status Run(const std::function<awaitable<absl::Status>(Conn&)>& call) {
    for (int attempt = 0;; ++attempt) {
      const bool reused = connected;
      absl::Status st = RunOnce(call);
      if (st.ok() || st.code() == absl::StatusCode::kNotFound ||
          st.code() == absl::StatusCode::kResourceExhausted ||
          st.code() == absl::StatusCode::kFailedPrecondition) {
        return st;
      }
      connected = false;
      conn.Close();
      if (!(reused && attempt == 0 && st.code() == absl::StatusCode::kUnavailable)) return st;
    }
  }

  absl::Status RunOnce(const std::function<awaitable<absl::Status>(Conn&)>& call) {
    std::optional<absl::Status> result;
    io.restart();
    asio::co_spawn(
        io,
        [&]() -> awaitable<absl::Status> {
          if (!connected) {
            absl::Status st = co_await ConnectTo(conn, address);
            if (st.ok()) st = co_await Authenticate(conn, options.auth_token, ++next_id);
            if (!st.ok()) co_return st;
            connected = true;
          }
          co_return co_await call(conn);
        },
        [&](std::exception_ptr e, absl::Status st) {
          result = e ? absl::InternalError("data client: unexpected exception") : std::move(st);
        });
    io.run_for(std::chrono::nanoseconds(options.timeout));
    if (!result) {
      conn.Close();
      connected = false;
      io.restart();
      io.run();  // the aborted operations finish the coroutine
      return absl::DeadlineExceededError(fmt::format(
          "storage node {} did not answer within {} ms", address, options.timeout / kMillisecond));
    }
    return *result;
  }

  Header Request(Op op, uint64_t body_bytes) {
    Header h;
    h.op = static_cast<uint8_t>(op);
    h.request_id = ++next_id;
    h.body_bytes = body_bytes;
    return h;
  }

  // The node's shared-memory channel, opened on first use when the node advertises one; nullptr
  // for TCP.
  ShmChannel* Local();

  std::string address;
  DataClientOptions options;
  std::unique_ptr<ShmChannel> shm;
  std::chrono::steady_clock::time_point next_probe{};
  int failed_probes = 0;  // in a row: the wait before the next probe doubles with each
  asio::io_context io;
  Conn conn;
  bool connected = false;
  uint64_t next_id = 0;
};

namespace {

// Sends `frame`, reads the reply header and, if OK, its body into *body (bounded).
awaitable<absl::Status> Exchange(Conn& conn, const Header& h, std::span<const asio::const_buffer> frame,
                                 uint64_t max_body, std::string* body) {
  auto [ec, n] = co_await asio::async_write(conn.socket, frame, kWhole, kTuple);
  if (ec) co_return absl::UnavailableError(fmt::format("sending to the storage node failed: {}", ec.message()));
  Header reply;
  if (absl::Status st = co_await ReadReply(conn, h.op, h.request_id, max_body, &reply); !st.ok()) {
    co_return st;
  }
  body->resize(reply.body_bytes);
  if (!body->empty()) {
    auto [ec2, m] = co_await asio::async_read(conn.socket, asio::buffer(*body), kWhole, kTuple);
    if (ec2) co_return absl::UnavailableError("the storage node closed the connection mid-reply");
  }
  co_return absl::OkStatus();
}

// PutMany over TCP: a writer sends the frames back to back while a reader takes the replies,
// so neither waits on the other; the node serves a connection's frames in order. A failure of
// either closes the socket, which ends the other.
awaitable<absl::Status> PipelinedPuts(Conn& conn, uint64_t first_id,
                                      std::span<const ObjectName> names,
                                      std::span<const std::string_view> values,
                                      std::span<absl::Status> out, std::span<uint8_t> answered) {
  std::fill(answered.begin(), answered.end(), 0);  // a retried call starts over
  const uint8_t op = static_cast<uint8_t>(Op::kPut);
  auto writer = [&]() -> awaitable<absl::Status> {
    for (size_t i = 0; i < names.size(); ++i) {
      Header h;
      h.op = op;
      h.request_id = first_id + i;
      h.body_bytes = sizeof(wire::PutHead) + values[i].size();
      const wire::PutHead head{names[i].ns, 0, names[i].key, values[i].size()};
      const std::array<asio::const_buffer, 3> frame{asio::buffer(&h, sizeof h),
                                                    asio::buffer(&head, sizeof head),
                                                    asio::buffer(values[i].data(), values[i].size())};
      auto [ec, n] = co_await asio::async_write(conn.socket, frame, kWhole, kTuple);
      if (ec) {
        conn.Close();
        co_return absl::UnavailableError(
            fmt::format("sending put {} of {} to the storage node failed: {}", i + 1, names.size(),
                        ec.message()));
      }
    }
    co_return absl::OkStatus();
  };
  auto reader = [&]() -> awaitable<absl::Status> {
    for (size_t i = 0; i < names.size(); ++i) {
      Header reply{};
      absl::Status st = co_await ReadReply(conn, op, first_id + i, 0, &reply);
      // The node's refusal of this object (a valid error reply) leaves the connection usable.
      const bool refused =
          reply.status != 0 && wire::ValidateReply(reply, op, first_id + i, 0).ok();
      if (st.ok() || refused) {
        out[i] = std::move(st);
        answered[i] = 1;
        continue;
      }
      conn.Close();
      co_return st;
    }
    co_return absl::OkStatus();
  };
  using namespace asio::experimental::awaitable_operators;
  auto [written, read] = co_await (writer() && reader());
  co_return !read.ok() ? read : written;
}

}  // namespace

ShmChannel* DataClient::Impl::Local() {
  if (shm && !shm->broken()) return shm.get();
  shm.reset();
  const auto now = std::chrono::steady_clock::now();
  if (!options.shared_memory || now < next_probe) return nullptr;
  // A node on another host (the usual case in a cluster), one without the path, or one older
  // than SHM_INFO fails every probe: waits of shm_retry, doubling up to 64 x, not a probe per
  // shm_retry forever.
  next_probe = now + std::chrono::nanoseconds(options.shm_retry) * (int64_t{1} << std::min(failed_probes, 6));
  ++failed_probes;
  std::string body;
  absl::Status st = Run([&](Conn& c) -> awaitable<absl::Status> {
    const Header h = Request(Op::kShmInfo, 0);
    const std::array<asio::const_buffer, 1> frame{asio::buffer(&h, sizeof h)};
    co_return co_await Exchange(c, h, frame, 16 + 4096, &body);
  });
  if (!st.ok() || body.size() < 16) return nullptr;
  const uint64_t token = wire::Load<uint64_t>(body.data());
  const uint32_t len = wire::Load<uint32_t>(body.data() + 8);
  if (len == 0 || body.size() != 16 + uint64_t{len}) return nullptr;  // none offered
  // Another host's path, or a socket that is gone: TCP (NotFound, Unavailable, PermissionDenied).
  absl::StatusOr<std::unique_ptr<ShmChannel>> c =
      ShmChannel::Connect(body.substr(16), token, options.timeout, options.shm_spin, options.auth_token);
  if (!c.ok()) return nullptr;
  shm = std::move(*c);
  failed_probes = 0;
  return shm.get();
}

DataClient::DataClient(std::string address, DataClientOptions options)
    : impl_(std::make_unique<Impl>(std::move(address), options)) {}
DataClient::~DataClient() = default;

const std::string& DataClient::address() const { return impl_->address; }

bool DataClient::UsesSharedMemory() { return impl_->Local() != nullptr; }

absl::Status DataClient::Put(ObjectName name, std::string_view bytes) {
  if (ShmChannel* local = impl_->Local()) {
    absl::Status st = local->Put(name, bytes);
    if (!local->broken()) return st;  // else over TCP
  }
  return impl_->Run([&](Conn& conn) -> awaitable<absl::Status> {
    const Header h = impl_->Request(Op::kPut, sizeof(wire::PutHead) + bytes.size());
    const wire::PutHead head{name.ns, 0, name.key, bytes.size()};
    const std::array<asio::const_buffer, 3> frame{asio::buffer(&h, sizeof h),
                                                  asio::buffer(&head, sizeof head),
                                                  asio::buffer(bytes.data(), bytes.size())};
    std::string body;
    co_return co_await Exchange(conn, h, frame, wire::kMaxMessageBytes, &body);
  });
}

absl::Status DataClient::PutMany(std::span<const ObjectName> names,
                                 std::span<const std::string_view> values,
                                 std::vector<absl::Status>* statuses) {
  if (names.size() != values.size()) {
    return absl::InvalidArgumentError(fmt::format("PutMany: {} names for {} values", names.size(),
                                                  values.size()));
  }
  statuses->assign(names.size(), absl::OkStatus());
  size_t first = 0;  // the objects from here on go over TCP
  if (ShmChannel* local = impl_->Local()) {
    for (; first < names.size(); ++first) {
      absl::Status st = local->Put(names[first], values[first]);
      if (local->broken()) break;
      (*statuses)[first] = std::move(st);
    }
  }
  if (first == names.size()) return absl::OkStatus();
  const std::span<absl::Status> out = std::span(*statuses).subspan(first);
  std::vector<uint8_t> answered(out.size(), 0);
  absl::Status st = impl_->Run([&](Conn& conn) -> awaitable<absl::Status> {
    const uint64_t first_id = impl_->next_id + 1;
    impl_->next_id += out.size();
    co_return co_await PipelinedPuts(conn, first_id, names.subspan(first), values.subspan(first),
                                     out, answered);
  });
  // Never OK without the node's reply: a call that failed before or between replies (no
  // connection, timeout) is the status of every object it did not hear about.
  for (size_t i = 0; i < out.size(); ++i) {
    if (!answered[i]) out[i] = st.ok() ? absl::InternalError("PutMany: no reply read") : st;
  }
  return st;
}

absl::Status DataClient::Get(std::span<const ObjectName> names, std::vector<std::string>* values,
                             std::vector<absl::StatusCode>* codes) {
  if (names.empty()) return absl::InvalidArgumentError("Get: no objects named");
  if (ShmChannel* local = impl_->Local()) {
    absl::Status st = local->Get(names, values, codes);
    // Else over TCP: the channel broke, or the node's limit on pins held at once refused part
    // of the batch (ResourceExhausted; the TCP path has no such limit).
    if (!local->broken() && !absl::IsResourceExhausted(st)) return st;
  }
  const std::vector<wire::ObjectRef> refs = wire::Refs(names);
  values->resize(names.size());
  codes->assign(names.size(), absl::StatusCode::kNotFound);
  return impl_->Run([&](Conn& conn) -> awaitable<absl::Status> {
    const wire::CountHead count{static_cast<uint32_t>(refs.size()), 0};
    const Header h = impl_->Request(Op::kGet, sizeof count + refs.size() * sizeof(wire::ObjectRef));
    const std::array<asio::const_buffer, 3> frame{
        asio::buffer(&h, sizeof h), asio::buffer(&count, sizeof count),
        asio::buffer(refs.data(), refs.size() * sizeof(wire::ObjectRef))};
    auto [ec, n] = co_await asio::async_write(conn.socket, frame, kTuple);
    if (ec) co_return absl::UnavailableError(fmt::format("sending to {} failed: {}", impl_->address, ec.message()));
    Header reply;
    if (absl::Status st = co_await ReadReply(conn, h.op, h.request_id, impl_->options.max_reply_bytes, &reply);
        !st.ok()) {
      co_return st;
    }
    const uint64_t table_bytes = sizeof count + refs.size() * sizeof(wire::GetItem);
    if (reply.body_bytes < table_bytes) co_return absl::InternalError("storage node's get reply is too short");
    std::vector<wire::GetItem> items(refs.size());
    wire::CountHead got;
    const std::array<asio::mutable_buffer, 2> table{asio::buffer(&got, sizeof got),
                                                    asio::buffer(items.data(), items.size() * sizeof(wire::GetItem))};
    auto [ec2, m] = co_await asio::async_read(conn.socket, table, kTuple);
    if (ec2) co_return absl::UnavailableError("the storage node closed the connection mid-reply");
    uint64_t payload = 0;
    for (const wire::GetItem& item : items) payload += item.size;
    if (got.count != refs.size() || table_bytes + payload != reply.body_bytes) {
      co_return absl::InternalError("storage node's get reply does not add up (count or sizes)");
    }
    // Scatter: each found object's bytes land in its string, no copy in between.
    std::vector<asio::mutable_buffer> into;
    for (size_t i = 0; i < items.size(); ++i) {
      if (items[i].status != 0) continue;
      (*codes)[i] = absl::StatusCode::kOk;
      (*values)[i].resize(items[i].size);
      if (items[i].size > 0) into.push_back(asio::buffer((*values)[i]));
    }
    if (!into.empty()) {
      auto [ec3, k] = co_await asio::async_read(conn.socket, into, kWhole, kTuple);
      if (ec3) co_return absl::UnavailableError("the storage node closed the connection mid-reply");
    }
    co_return absl::OkStatus();
  });
}

absl::StatusOr<std::vector<bool>> DataClient::Delete(std::span<const ObjectName> names) {
  if (names.empty()) return absl::InvalidArgumentError("Delete: no objects named");
  const std::vector<wire::ObjectRef> refs = wire::Refs(names);
  std::string body;
  absl::Status st = impl_->Run([&](Conn& conn) -> awaitable<absl::Status> {
    const wire::CountHead count{static_cast<uint32_t>(refs.size()), 0};
    const Header h = impl_->Request(Op::kDelete, sizeof count + refs.size() * sizeof(wire::ObjectRef));
    const std::array<asio::const_buffer, 3> frame{
        asio::buffer(&h, sizeof h), asio::buffer(&count, sizeof count),
        asio::buffer(refs.data(), refs.size() * sizeof(wire::ObjectRef))};
    co_return co_await Exchange(conn, h, frame, 8 + 4 * refs.size(), &body);
  });
  if (!st.ok()) return st;
  if (body.size() != 8 + 4 * refs.size()) return absl::InternalError("storage node's delete reply has the wrong size");
  std::vector<bool> out(refs.size());
  for (size_t i = 0; i < refs.size(); ++i) out[i] = wire::Load<uint32_t>(body.data() + 8 + 4 * i) == 0;
  return out;
}

absl::StatusOr<uint64_t> DataClient::DropNamespace(NamespaceId ns) {
  std::string body;
  absl::Status st = impl_->Run([&](Conn& conn) -> awaitable<absl::Status> {
    const Header h = impl_->Request(Op::kDropNamespace, 8);
    const uint32_t b[2] = {ns, 0};
    const std::array<asio::const_buffer, 2> frame{asio::buffer(&h, sizeof h), asio::buffer(b, 8)};
    co_return co_await Exchange(conn, h, frame, 8, &body);
  });
  if (!st.ok()) return st;
  if (body.size() != 8) return absl::InternalError("storage node's drop reply has the wrong size");
  return wire::Load<uint64_t>(body.data());
}

absl::Status DataClient::CopyTo(ObjectName name, std::string_view destination,
                               uint64_t checksum) {
  if (destination.empty() || destination.size() > wire::kMaxAddressBytes) {
    return absl::InvalidArgumentError(fmt::format("CopyTo: bad destination address '{}'", destination));
  }
  return impl_->Run([&](Conn& conn) -> awaitable<absl::Status> {
    const wire::CopyHead head{{name.ns, 0, name.key}, static_cast<uint32_t>(destination.size()),
                              checksum != 0 ? wire::kCopyChecksum : 0};
    const size_t checksum_bytes = checksum != 0 ? sizeof checksum : 0;
    const Header h =
        impl_->Request(Op::kCopyTo, sizeof head + destination.size() + checksum_bytes);
    const std::array<asio::const_buffer, 4> frame{asio::buffer(&h, sizeof h), asio::buffer(&head, sizeof head),
                                                  asio::buffer(destination.data(), destination.size()),
                                                  asio::buffer(&checksum, checksum_bytes)};
    std::string body;
    co_return co_await Exchange(conn, h, frame, 0, &body);
  });
}

absl::StatusOr<std::string> DataClient::Stats() {
  std::string body;
  absl::Status st = impl_->Run([&](Conn& conn) -> awaitable<absl::Status> {
    const Header h = impl_->Request(Op::kStats, 0);
    const std::array<asio::const_buffer, 1> frame{asio::buffer(&h, sizeof h)};
    co_return co_await Exchange(conn, h, frame, 1 << 20, &body);
  });
  if (!st.ok()) return st;
  return body;
}

}  // namespace myriad::kvstore
