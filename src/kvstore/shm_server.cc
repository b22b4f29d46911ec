// ShmServer: an accept thread and one thread per connection, all blocking on poll with the
// connection's deadline and an eventfd that Stop makes readable (which wakes every wait).
#include "kvstore/auth.h"
#include "kvstore/shm_server.h"

#include <fmt/format.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <list>
#include <optional>
#include <mutex>
#include <thread>
#include <vector>

#include "kvstore/shm_io.h"
#include "kvstore/shm_wire.h"

namespace myriad::kvstore {

using shm::Clock;
using shm::DeadlineIn;
using wire::Header;

namespace {

enum : uint8_t { kFree, kPin, kWrite };

struct Held {
  Extent extent;
  uint8_t kind = kFree;
};

// One connection's pins and reservations, by handle (an index, reused through a free list).
struct Session {
  int fd = -1;
  bool hello = false;
  std::vector<Held> held;
  std::vector<uint32_t> free;
  uint32_t live = 0;

  uint32_t Add(const Extent& e, uint8_t kind) {
    uint32_t h;
    if (!free.empty()) {
      h = free.back();
      free.pop_back();
    } else {
      h = static_cast<uint32_t>(held.size());
      held.emplace_back();
    }
    held[h] = Held{e, kind};
    ++live;
    return h;
  }
  // The handle's entry if it is live and of `kind`.
  Held* Find(uint32_t h, uint8_t kind) {
    return h < held.size() && held[h].kind == kind ? &held[h] : nullptr;
  }
  void Drop(uint32_t h) {
    held[h].kind = kFree;
    free.push_back(h);
    --live;
  }
};

}  // namespace

struct ShmServer::Impl {
  Impl(NodeStore* s, ShmServerOptions o) : store(s), options(std::move(o)) {}

  NodeStore* store;
  ShmServerOptions options;
  int listen_fd = -1;
  int wake_fd = -1;
  std::thread acceptor;
  std::mutex mu;
  struct Worker {
    std::thread thread;
    std::atomic<bool> done{false};
  };
  std::list<Worker> workers;
  std::atomic<int> open{0};
  std::atomic<bool> started{false};
  std::function<void()> on_no_room;

  struct Counters {
    std::atomic<uint64_t> accepted{0}, refused{0}, hellos{0}, gets{0}, get_objects{0},
        get_misses{0}, puts{0}, aborts{0}, released_at_close{0}, bytes_in{0}, bytes_out{0},
        bad_frames{0}, errors{0}, timeouts{0};
    std::atomic<int64_t> held{0};
  } c;

  void AcceptLoop();
  void Reap(bool all);
  void Serve(int fd);
  // Serves one request whose header is valid; false when the connection must close.
  bool Handle(Session& s, const Header& h, const std::vector<uint8_t>& body);
  bool Hello(Session& s, const Header& h, const std::vector<uint8_t>& body);
  bool Reply(Session& s, const Header& req, const void* body, size_t bytes);
  // An error reply (kError for an invalid header); the caller then closes the connection.
  void Fail(Session& s, const Header& req, const absl::Status& st, bool bad_header);
  void ReleaseAll(Session& s);
  uint64_t MaxBody(uint8_t op) const;
};

uint64_t ShmServer::Impl::MaxBody(uint8_t op) const {
  const uint64_t n = options.max_batch;
  switch (static_cast<shm::Op>(op)) {
    case shm::Op::kHello: return 8 + kMaxAuthTokenBytes;
    case shm::Op::kGet: return shm::BodyBytes(n, sizeof(wire::ObjectRef));
    case shm::Op::kRelease: return shm::BodyBytes(n, 4);
    case shm::Op::kPutStart: return shm::BodyBytes(n, sizeof(wire::PutHead));
    case shm::Op::kPutEnd: return shm::BodyBytes(n, sizeof(shm::EndItem));
  }
  return 0;
}

void ShmServer::Impl::AcceptLoop() {
  for (;;) {
    Reap(false);
    const absl::Status ready =
        shm::WaitReadable(listen_fd, shm::WaitLimit{Clock::now() + std::chrono::hours(1), 0}, wake_fd);
    if (absl::IsCancelled(ready)) return;
    if (!ready.ok()) continue;
    const int fd = accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      // Out of descriptors and the like: do not spin; the open connections go on.
      if (errno != EINTR && errno != EAGAIN) std::this_thread::sleep_for(std::chrono::milliseconds(10));
      continue;
    }
    c.accepted.fetch_add(1, std::memory_order_relaxed);
    if (open.load() >= options.max_connections) {
      c.refused.fetch_add(1, std::memory_order_relaxed);
      close(fd);
      continue;
    }
    open.fetch_add(1);
    std::lock_guard lock(mu);
    Worker& w = workers.emplace_back();
    w.thread = std::thread([this, fd, &w] {
      Serve(fd);
      open.fetch_sub(1);
      w.done = true;
    });
  }
}

void ShmServer::Impl::Reap(bool all) {
  std::lock_guard lock(mu);
  for (auto it = workers.begin(); it != workers.end();) {
    if (all || it->done.load()) {
      it->thread.join();
      it = workers.erase(it);
    } else {
      ++it;
    }
  }
}

void ShmServer::Impl::Serve(int fd) {
  Session s;
  s.fd = fd;
  std::vector<uint8_t> body;
  for (;;) {
    const absl::Status idle = shm::WaitReadable(fd, DeadlineIn(options.idle_timeout, options.spin), wake_fd);
    if (absl::IsDeadlineExceeded(idle)) c.timeouts.fetch_add(1, std::memory_order_relaxed);
    if (!idle.ok()) break;
    const auto deadline = DeadlineIn(options.frame_timeout, options.spin);
    Header h;
    absl::Status st = shm::RecvAll(fd, &h, sizeof h, deadline, wake_fd);
    if (st.ok()) {
      st = shm::ValidateRequest(h, MaxBody(h.op));
      if (!st.ok()) {
        Fail(s, h, st, true);
        break;
      }
      body.resize(h.body_bytes);
      st = shm::RecvAll(fd, body.data(), body.size(), deadline, wake_fd);
    }
    if (absl::IsDeadlineExceeded(st)) c.timeouts.fetch_add(1, std::memory_order_relaxed);
    if (!st.ok() || !Handle(s, h, body)) break;
  }
  ReleaseAll(s);
  close(fd);
}

void ShmServer::Impl::ReleaseAll(Session& s) {
  for (Held& held : s.held) {
    if (held.kind == kPin) {
      store->Unpin(held.extent);
      c.released_at_close.fetch_add(1, std::memory_order_relaxed);
    } else if (held.kind == kWrite) {
      store->Abort(held.extent);
      c.aborts.fetch_add(1, std::memory_order_relaxed);
    }
    held.kind = kFree;
  }
  c.held.fetch_sub(s.live);
  s.live = 0;
}

bool ShmServer::Impl::Reply(Session& s, const Header& req, const void* body, size_t bytes) {
  Header r = wire::ReplyHeader(req, bytes);
  iovec iov[2] = {{&r, sizeof r}, {const_cast<void*>(body), bytes}};
  return shm::SendAll(s.fd, iov, DeadlineIn(options.frame_timeout, options.spin), {}, wake_fd).ok();
}

void ShmServer::Impl::Fail(Session& s, const Header& req, const absl::Status& st,
                           bool bad_header) {
  c.errors.fetch_add(1, std::memory_order_relaxed);
  if (bad_header || st.code() == absl::StatusCode::kInvalidArgument) {
    c.bad_frames.fetch_add(1, std::memory_order_relaxed);
  }
  std::string message;
  Header r = wire::ErrorReply(req, st, bad_header, &message);
  iovec iov[2] = {{&r, sizeof r}, {message.data(), message.size()}};
  (void)shm::SendAll(s.fd, iov, DeadlineIn(options.frame_timeout, options.spin), {}, wake_fd);
}

bool ShmServer::Impl::Hello(Session& s, const Header& h, const std::vector<uint8_t>& body) {
  if (body.size() < 8 || wire::Load<uint64_t>(body.data()) != options.token) {
    Fail(s, h, absl::PermissionDeniedError(
                   "shm hello: wrong token (this socket belongs to another node)"), false);
    return false;
  }
  const std::string_view secret(reinterpret_cast<const char*>(body.data()) + 8, body.size() - 8);
  if (!options.auth_token.empty() && !TokensEqual(options.auth_token, secret)) {
    Fail(s, h, absl::UnauthenticatedError(
                   "shm hello: wrong or missing cluster token (--auth-token-file)"), false);
    return false;
  }
  const std::vector<SegmentInfo> segments = store->Segments();
  std::vector<uint64_t> sizes;
  std::vector<int> fds;
  for (const SegmentInfo& seg : segments) {
    sizes.push_back(seg.bytes);
    fds.push_back(seg.fd);
  }
  const wire::CountHead count{static_cast<uint32_t>(sizes.size()), 0};
  Header r;
  r.op = static_cast<uint8_t>(h.op | wire::kReplyBit);
  r.request_id = h.request_id;
  r.body_bytes = sizeof count + 8 * sizes.size();
  // The descriptors go in groups, each attached to the sizes of its segments.
  const auto deadline = DeadlineIn(options.frame_timeout, options.spin);
  for (size_t first = 0; first == 0 || first < sizes.size(); first += shm::kMaxFdsPerMessage) {
    const size_t n = std::min(shm::kMaxFdsPerMessage, sizes.size() - first);
    std::vector<iovec> iov;
    if (first == 0) {
      iov.push_back({&r, sizeof r});
      iov.push_back({const_cast<wire::CountHead*>(&count), sizeof count});
    }
    if (n > 0) iov.push_back({sizes.data() + first, 8 * n});
    if (!shm::SendAll(s.fd, iov, deadline, std::span<const int>(fds.data() + first, n), wake_fd)
             .ok()) {
      return false;
    }
    if (sizes.empty()) break;
  }
  s.hello = true;
  c.hellos.fetch_add(1, std::memory_order_relaxed);
  return true;
}

bool ShmServer::Impl::Handle(Session& s, const Header& h, const std::vector<uint8_t>& body) {
  const auto op = static_cast<shm::Op>(h.op);
  if (op == shm::Op::kHello) return Hello(s, h, body);
  if (!s.hello) {
    Fail(s, h, absl::FailedPreconditionError(fmt::format(
                   "{} before shm_hello: say hello with the node's token first", shm::OpName(h.op))),
         false);
    return false;
  }
  size_t item = 0;
  switch (op) {
    case shm::Op::kGet: item = sizeof(wire::ObjectRef); break;
    case shm::Op::kRelease: item = 4; break;
    case shm::Op::kPutStart: item = sizeof(wire::PutHead); break;
    default: item = sizeof(shm::EndItem); break;
  }
  const uint32_t count = body.size() >= 8 ? wire::Load<wire::CountHead>(body.data()).count : 0;
  if (body.size() < 8 || count == 0 || count > options.max_batch ||
      body.size() != shm::BodyBytes(count, item) ||
      wire::Load<wire::CountHead>(body.data()).reserved != 0) {
    Fail(s, h, absl::InvalidArgumentError(fmt::format(
                   "bad {} body: {} bytes do not hold a count of 1-{}, a 'reserved' 0 and that "
                   "many {}-byte items (padded to 8 bytes)",
                   shm::OpName(h.op), body.size(), options.max_batch, item)),
         false);
    return false;
  }
  const uint8_t* items = body.data() + 8;
  if (op == shm::Op::kRelease) {
    for (uint32_t i = 0; i < count; ++i) {
      const uint32_t handle = wire::Load<uint32_t>(items + 4 * i);
      Held* held = s.Find(handle, kPin);
      if (held == nullptr) {
        Fail(s, h, absl::InvalidArgumentError(fmt::format(
                       "shm_release: handle {} is not an object this connection pinned", handle)),
             false);
        return false;
      }
      store->Unpin(held->extent);
      s.Drop(handle);
      c.held.fetch_sub(1);
    }
    return true;  // no reply
  }
  if (op == shm::Op::kPutEnd) {
    std::vector<uint32_t> out(2 + count + (count & 1));
    out[0] = count;
    for (uint32_t i = 0; i < count; ++i) {
      const auto e = wire::Load<shm::EndItem>(items + 8 * i);
      Held* held = s.Find(e.handle, kWrite);
      if (held == nullptr || e.commit > 1) {
        out[2 + i] = static_cast<uint32_t>(absl::StatusCode::kInvalidArgument);
        c.errors.fetch_add(1, std::memory_order_relaxed);
        continue;
      }
      if (e.commit == 1) {
        store->Commit(held->extent);
        c.puts.fetch_add(1, std::memory_order_relaxed);
        c.bytes_in.fetch_add(held->extent.size, std::memory_order_relaxed);
      } else {
        store->Abort(held->extent);
        c.aborts.fetch_add(1, std::memory_order_relaxed);
      }
      s.Drop(e.handle);
      c.held.fetch_sub(1);
    }
    return Reply(s, h, out.data(), 4 * out.size());
  }
  std::vector<uint8_t> out(8 + count * sizeof(shm::Location));
  const wire::CountHead head{count, 0};
  std::memcpy(out.data(), &head, sizeof head);
  bool no_room = false;
  if (op == shm::Op::kGet) c.gets.fetch_add(1, std::memory_order_relaxed);
  for (uint32_t i = 0; i < count; ++i) {
    shm::Location loc;
    const bool full = s.live >= options.max_handles;
    if (op == shm::Op::kGet) {
      const auto ref = wire::Load<wire::ObjectRef>(items + 16 * i);
      std::optional<Extent> e;
      if (ref.reserved != 0) {
        loc.status = static_cast<uint32_t>(absl::StatusCode::kInvalidArgument);
      } else if (full) {
        loc.status = static_cast<uint32_t>(absl::StatusCode::kResourceExhausted);
      } else if (e = store->Pin({ref.ns, ref.key}); !e) {
        loc.status = static_cast<uint32_t>(absl::StatusCode::kNotFound);
        c.get_misses.fetch_add(1, std::memory_order_relaxed);
      } else {
        loc = {0, s.Add(*e, kPin), e->segment, 0, e->offset, e->size};
        c.get_objects.fetch_add(1, std::memory_order_relaxed);
        c.bytes_out.fetch_add(e->size, std::memory_order_relaxed);
      }
    } else {
      const auto put = wire::Load<wire::PutHead>(items + 24 * i);
      if (put.reserved != 0) {
        loc.status = static_cast<uint32_t>(absl::StatusCode::kInvalidArgument);
      } else if (full) {
        loc.status = static_cast<uint32_t>(absl::StatusCode::kResourceExhausted);
      } else if (absl::StatusOr<Extent> e = store->Reserve({put.ns, put.key}, put.size); !e.ok()) {
        loc.status = static_cast<uint32_t>(e.status().code());
        no_room = no_room || absl::IsResourceExhausted(e.status());
      } else {
        loc = {0, s.Add(*e, kWrite), e->segment, 0, e->offset, e->size};
      }
    }
    if (loc.status == 0) c.held.fetch_add(1);
    std::memcpy(out.data() + 8 + i * sizeof loc, &loc, sizeof loc);
  }
  if (no_room && on_no_room) on_no_room();
  return Reply(s, h, out.data(), out.size());
}

ShmServer::ShmServer(NodeStore* store, ShmServerOptions options)
    : impl_(std::make_unique<Impl>(store, std::move(options))) {}

ShmServer::~ShmServer() { Stop(); }

absl::Status ShmServer::Start() {
  const std::string& path = impl_->options.path;
  sockaddr_un addr{};
  if (path.empty() || path.size() >= sizeof addr.sun_path) {
    return absl::InvalidArgumentError(fmt::format(
        "shm socket path '{}' is empty or longer than {} bytes", path, sizeof addr.sun_path - 1));
  }
  const std::vector<SegmentInfo> segments = impl_->store->Segments();
  if (segments.size() > shm::kMaxSegments) {
    return absl::FailedPreconditionError(fmt::format(
        "shm data path: {} segments, more than the {} a client maps; use larger segments",
        segments.size(), shm::kMaxSegments));
  }
  for (const SegmentInfo& seg : segments) {
    if (seg.fd < 0) {
      return absl::FailedPreconditionError(
          "shm data path: the node's segments are not shareable (memfd_create was refused)");
    }
  }
  struct stat st{};
  if (lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      return absl::FailedPreconditionError(
          fmt::format("shm socket path '{}' exists and is not a socket", path));
    }
    absl::StatusOr<int> live = shm::ConnectUnix(path);
    if (live.ok()) {
      close(*live);
      return absl::AlreadyExistsError(
          fmt::format("shm socket '{}' is in use by another process", path));
    }
    unlink(path.c_str());  // stale: its node is gone
  }
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.data(), path.size());
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0 || bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0 ||
      chmod(path.c_str(), 0600) != 0 || listen(fd, 64) != 0) {
    const int e = errno;
    if (fd >= 0) close(fd);
    return absl::UnavailableError(
        fmt::format("shm data path: cannot listen on '{}': {}", path, std::strerror(e)));
  }
  impl_->wake_fd = eventfd(0, EFD_CLOEXEC);
  if (impl_->wake_fd < 0) {
    close(fd);
    unlink(path.c_str());
    return absl::UnavailableError(fmt::format("eventfd: {}", std::strerror(errno)));
  }
  impl_->listen_fd = fd;
  impl_->started = true;
  impl_->acceptor = std::thread([this] { impl_->AcceptLoop(); });
  return absl::OkStatus();
}

void ShmServer::Stop() {
  if (!impl_->started.exchange(false)) return;
  const uint64_t one = 1;
  (void)!write(impl_->wake_fd, &one, sizeof one);  // stays readable: every wait wakes
  impl_->acceptor.join();
  impl_->Reap(true);
  close(impl_->listen_fd);
  close(impl_->wake_fd);
  unlink(impl_->options.path.c_str());
}

const std::string& ShmServer::path() const { return impl_->options.path; }
uint64_t ShmServer::token() const { return impl_->options.token; }
int ShmServer::connections() const { return impl_->open.load(); }
void ShmServer::set_on_no_room(std::function<void()> f) { impl_->on_no_room = std::move(f); }

ShmServerStats ShmServer::stats() const {
  const Impl::Counters& c = impl_->c;
  ShmServerStats s;
  s.connections_accepted = c.accepted.load();
  s.connections_refused = c.refused.load();
  s.hellos = c.hellos.load();
  s.gets = c.gets.load();
  s.get_objects = c.get_objects.load();
  s.get_misses = c.get_misses.load();
  s.puts = c.puts.load();
  s.aborts = c.aborts.load();
  s.released_at_close = c.released_at_close.load();
  s.bytes_in = c.bytes_in.load();
  s.bytes_out = c.bytes_out.load();
  s.bad_frames = c.bad_frames.load();
  s.errors = c.errors.load();
  s.timeouts = c.timeouts.load();
  s.held = static_cast<uint64_t>(std::max<int64_t>(0, c.held.load()));
  return s;
}

}  // namespace myriad::kvstore
