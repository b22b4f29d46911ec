#include "kvstore/shm_client.h"

#include <fmt/format.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <thread>
#include <unordered_map>

#include "kvstore/shm_io.h"

namespace myriad::kvstore {

using shm::DeadlineIn;
using wire::Header;

// One thread for the process, started by the first channel: polls the open channels' sockets
// for a hangup (the node closed its end, or died) and breaks such a channel, unmapping its
// segments. It takes a channel's lock only if free (try_lock): a call in progress sees the
// hangup itself, and a channel breaking under its own lock removes itself from here, so
// neither waits on the other.
class ShmHangupWatcher {
 public:
  static ShmHangupWatcher& Get() {
    static ShmHangupWatcher* w = new ShmHangupWatcher;  // never destroyed: its thread runs on
    return *w;
  }
  void Add(int fd, ShmChannel* c) {
    std::lock_guard lock(mu_);
    channels_[fd] = c;
    Wake();
  }
  // Takes channel c, registered with its socket fd, off the list (if the watcher has not).
  void Remove(int fd, ShmChannel* c) {
    std::lock_guard lock(mu_);
    if (const auto it = channels_.find(fd); it != channels_.end() && it->second == c) {
      channels_.erase(it);
      Wake();
    }
  }

 private:
  ShmHangupWatcher() : wake_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
    std::thread([this] { Loop(); }).detach();
  }
  void Wake() {
    const uint64_t one = 1;
    (void)!write(wake_, &one, sizeof one);
  }
  void Loop() {
    std::vector<pollfd> fds;
    bool busy = false;
    for (;;) {
      fds.assign(1, pollfd{wake_, POLLIN, 0});
      {
        std::lock_guard lock(mu_);
        for (const auto& [fd, c] : channels_) fds.push_back(pollfd{fd, POLLRDHUP, 0});
      }
      // A channel that was busy is asked again soon; else wait for a hangup or a change.
      if (poll(fds.data(), fds.size(), busy ? 10 : -1) < 0) continue;
      if (fds[0].revents != 0) {
        uint64_t n;
        (void)!read(wake_, &n, sizeof n);
      }
      busy = false;
      std::lock_guard lock(mu_);
      for (size_t i = 1; i < fds.size(); ++i) {
        if ((fds[i].revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) == 0) continue;
        const auto it = channels_.find(fds[i].fd);
        if (it == channels_.end()) continue;  // removed since
        switch (it->second->ReapIfHungUp(fds[i].fd)) {
          case ShmChannel::Reap::kReaped:
            channels_.erase(it);
            break;
          case ShmChannel::Reap::kBusy:
            busy = true;
            break;
          case ShmChannel::Reap::kAlive:
            break;
        }
      }
    }
  }

  const int wake_;
  std::mutex mu_;
  std::unordered_map<int, ShmChannel*> channels_;  // by socket
};

absl::StatusOr<std::unique_ptr<ShmChannel>> ShmChannel::Connect(const std::string& path,
                                                                uint64_t token, Nanos timeout,
                                                                Nanos spin,
                                                                std::string_view auth_token) {
  absl::StatusOr<int> fd = shm::ConnectUnix(path);
  if (!fd.ok()) return fd.status();
  std::unique_ptr<ShmChannel> c(new ShmChannel(*fd, timeout, spin));
  if (absl::Status st = c->Hello(token, auth_token); !st.ok()) return st;
  ShmHangupWatcher::Get().Add(*fd, c.get());
  return c;
}

ShmChannel::~ShmChannel() {
  // A channel without a socket is off the list already (Broken, or the watcher's reaping,
  // which may be under way: hence the lock to read fd_, and Remove's check of the channel).
  int fd;
  {
    std::lock_guard lock(mu_);
    fd = fd_;
  }
  if (fd >= 0) ShmHangupWatcher::Get().Remove(fd, this);
  Close();
}

void ShmChannel::Close() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
  // Unmapped at once: a node that went away is not kept in memory by this client's mappings.
  for (const Map& m : maps_) munmap(m.base, m.bytes);
  maps_.clear();
}

absl::Status ShmChannel::Broken(absl::Status st) {
  // Out of the watcher's list first: the socket's number may be reused once closed.
  if (fd_ >= 0) ShmHangupWatcher::Get().Remove(fd_, this);
  Close();
  return st;
}

ShmChannel::Reap ShmChannel::ReapIfHungUp(int fd) {
  std::unique_lock lock(mu_, std::try_to_lock);
  if (!lock.owns_lock()) return Reap::kBusy;
  if (fd_ != fd) return Reap::kAlive;
  pollfd p{fd_, POLLRDHUP, 0};
  if (poll(&p, 1, 0) <= 0 || (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) == 0) return Reap::kAlive;
  Close();
  return Reap::kReaped;
}

absl::Status ShmChannel::Hello(uint64_t token, std::string_view auth_token) {
  Header h;
  h.op = static_cast<uint8_t>(shm::Op::kHello);
  h.request_id = ++next_id_;
  h.body_bytes = 8 + auth_token.size();
  iovec iov[3] = {{&h, sizeof h},
                  {&token, 8},
                  {const_cast<char*>(auth_token.data()), auth_token.size()}};
  const auto deadline = DeadlineIn(timeout_, spin_);
  if (absl::Status st = shm::SendAll(fd_, iov, deadline); !st.ok()) return Broken(st);
  std::vector<int> fds;
  absl::Status st = [&]() -> absl::Status {
    Header r;
    if (absl::Status s = shm::RecvAll(fd_, &r, sizeof r, deadline, -1, &fds); !s.ok()) return s;
    const uint64_t max = sizeof(wire::CountHead) + 8 * uint64_t{shm::kMaxSegments};
    if (absl::Status s = wire::ValidateReply(r, h.op, h.request_id, max); !s.ok()) return s;
    reply_.resize(r.body_bytes);
    if (absl::Status s = shm::RecvAll(fd_, reply_.data(), reply_.size(), deadline, -1, &fds);
        !s.ok()) {
      return s;
    }
    if (r.status != 0) {
      return absl::Status(static_cast<absl::StatusCode>(r.status),
                          fmt::format("the storage node refused the shm hello: {}",
                                      std::string_view(reinterpret_cast<const char*>(reply_.data()),
                                                       reply_.size())));
    }
    const uint32_t count = reply_.size() >= 8 ? wire::Load<uint32_t>(reply_.data()) : 0;
    if (reply_.size() != 8 + 8 * uint64_t{count} || fds.size() != count) {
      return absl::InternalError(fmt::format(
          "bad shm hello reply: {} bytes and {} descriptors for {} segments", reply_.size(),
          fds.size(), count));
    }
    for (uint32_t i = 0; i < count; ++i) {
      const uint64_t bytes = wire::Load<uint64_t>(reply_.data() + 8 + 8 * i);
      struct stat st{};
      // A mapping past the memfd's end would fault (SIGBUS) on access: check its size first.
      if (fstat(fds[i], &st) != 0 || static_cast<uint64_t>(st.st_size) < bytes || bytes == 0) {
        return absl::InternalError(fmt::format(
            "bad shm hello reply: segment {} of {} bytes does not fit its descriptor", i, bytes));
      }
      void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fds[i], 0);
      if (p == MAP_FAILED) {
        return absl::ResourceExhaustedError(fmt::format(
            "mapping segment {} ({} bytes) failed: {}", i, bytes, std::strerror(errno)));
      }
      maps_.push_back({static_cast<std::byte*>(p), bytes});
    }
    return absl::OkStatus();
  }();
  shm::CloseAll(&fds);  // the mappings stay
  if (!st.ok()) return Broken(st);
  return absl::OkStatus();
}

absl::Status ShmChannel::Call(shm::Op op, uint32_t count, const void* items, size_t item_bytes,
                              uint64_t max_reply) {
  if (broken()) return absl::UnavailableError("the shm channel is closed");
  Header h;
  h.op = static_cast<uint8_t>(op);
  h.request_id = ++next_id_;
  h.body_bytes = shm::BodyBytes(count, item_bytes);
  const wire::CountHead head{count, 0};
  static constexpr uint8_t kZeros[8] = {};
  const size_t bytes = count * item_bytes;
  iovec iov[4] = {{&h, sizeof h},
                  {const_cast<wire::CountHead*>(&head), sizeof head},
                  {const_cast<void*>(items), bytes},
                  {const_cast<uint8_t*>(kZeros), h.body_bytes - sizeof head - bytes}};
  const auto deadline = DeadlineIn(timeout_, spin_);
  if (absl::Status st = shm::SendAll(fd_, iov, deadline); !st.ok()) {
    return Broken(absl::UnavailableError(
        fmt::format("sending to the node's shm socket failed: {}", std::string(st.message()))));
  }
  if (op == shm::Op::kRelease) return absl::OkStatus();
  Header r;
  absl::Status st = shm::RecvAll(fd_, &r, sizeof r, deadline);
  if (st.ok()) st = wire::ValidateReply(r, h.op, h.request_id, max_reply);
  if (st.ok()) {
    reply_.resize(r.body_bytes);
    st = shm::RecvAll(fd_, reply_.data(), reply_.size(), deadline);
  }
  if (!st.ok()) {
    const absl::StatusCode code =
        absl::IsDeadlineExceeded(st) ? st.code() : absl::StatusCode::kUnavailable;
    return Broken(absl::Status(
        code, fmt::format("the node's shm socket ({}): {}", shm::OpName(h.op), std::string(st.message()))));
  }
  if (r.status != 0) {
    // The node closes the connection after an error reply.
    return Broken(absl::Status(
        static_cast<absl::StatusCode>(r.status),
        fmt::format("the storage node refused {}: {}", shm::OpName(h.op),
                    std::string_view(reinterpret_cast<const char*>(reply_.data()), reply_.size()))));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<shm::Location>> ShmChannel::CallForLocations(shm::Op op, const void* items, size_t n,
                                                                        size_t item_bytes) {
  const auto count = static_cast<uint32_t>(n);
  const uint64_t reply_bytes = 8 + uint64_t{count} * sizeof(shm::Location);
  if (absl::Status st = Call(op, count, items, item_bytes, reply_bytes); !st.ok()) return st;
  if (reply_.size() != reply_bytes || wire::Load<uint32_t>(reply_.data()) != count) {
    return Broken(absl::InternalError("bad shm reply: its size or count does not match"));
  }
  std::vector<shm::Location> out(count);
  std::memcpy(out.data(), reply_.data() + 8, count * sizeof(shm::Location));
  for (const shm::Location& l : out) {
    if (l.status != 0) continue;
    if (l.segment >= maps_.size() || l.offset > maps_[l.segment].bytes ||
        l.size > maps_[l.segment].bytes - l.offset) {
      return Broken(absl::InternalError(fmt::format(
          "bad shm reply: segment {} offset {} size {} is outside the mapped segments",
          l.segment, l.offset, l.size)));
    }
  }
  return out;
}

absl::StatusOr<std::vector<shm::Location>> ShmChannel::Pin(std::span<const ObjectName> names) {
  std::lock_guard lock(mu_);
  if (names.empty()) return absl::InvalidArgumentError("Pin: no objects named");
  const std::vector<wire::ObjectRef> refs = wire::Refs(names);
  return CallForLocations(shm::Op::kGet, refs.data(), refs.size(), sizeof(wire::ObjectRef));
}

absl::Status ShmChannel::Release(std::span<const uint32_t> handles) {
  std::lock_guard lock(mu_);
  if (handles.empty()) return absl::OkStatus();
  return Call(shm::Op::kRelease, static_cast<uint32_t>(handles.size()), handles.data(), 4, 0);
}

absl::StatusOr<std::vector<shm::Location>> ShmChannel::Reserve(std::span<const ObjectName> names,
                                                               std::span<const uint64_t> sizes) {
  std::lock_guard lock(mu_);
  if (names.empty() || names.size() != sizes.size()) {
    return absl::InvalidArgumentError("Reserve: needs one size per name, at least one");
  }
  std::vector<wire::PutHead> heads(names.size());
  for (size_t i = 0; i < names.size(); ++i) heads[i] = {names[i].ns, 0, names[i].key, sizes[i]};
  return CallForLocations(shm::Op::kPutStart, heads.data(), heads.size(), sizeof(wire::PutHead));
}

absl::StatusOr<std::vector<absl::StatusCode>> ShmChannel::End(std::span<const shm::EndItem> items) {
  std::lock_guard lock(mu_);
  if (items.empty()) return absl::InvalidArgumentError("End: no reservations named");
  const auto count = static_cast<uint32_t>(items.size());
  const uint64_t want = shm::BodyBytes(count, 4);
  if (absl::Status st = Call(shm::Op::kPutEnd, count, items.data(), sizeof(shm::EndItem), want);
      !st.ok()) {
    return st;
  }
  if (reply_.size() != want || wire::Load<uint32_t>(reply_.data()) != count) {
    return Broken(absl::InternalError("bad shm put_end reply: its size or count does not match"));
  }
  std::vector<absl::StatusCode> out(count);
  for (uint32_t i = 0; i < count; ++i) {
    out[i] = static_cast<absl::StatusCode>(wire::Load<uint32_t>(reply_.data() + 8 + 4 * i));
  }
  return out;
}

absl::Status ShmChannel::Put(ObjectName name, std::string_view bytes) {
  std::lock_guard lock(mu_);
  const uint64_t size = bytes.size();
  absl::StatusOr<std::vector<shm::Location>> room =
      Reserve(std::span<const ObjectName>(&name, 1), std::span<const uint64_t>(&size, 1));
  if (!room.ok()) return room.status();
  const shm::Location& l = (*room)[0];
  if (l.status != 0) {
    return absl::Status(static_cast<absl::StatusCode>(l.status),
                        fmt::format("the storage node found no room for {} bytes (shm put)", size));
  }
  if (size > 0) std::memcpy(At(l), bytes.data(), size);
  const shm::EndItem end{l.handle, 1};
  absl::StatusOr<std::vector<absl::StatusCode>> codes = End(std::span<const shm::EndItem>(&end, 1));
  if (!codes.ok()) return codes.status();
  if ((*codes)[0] != absl::StatusCode::kOk) {
    return Broken(absl::InternalError("the storage node refused to commit its own reservation"));
  }
  return absl::OkStatus();
}

absl::Status ShmChannel::Get(std::span<const ObjectName> names, std::vector<std::string>* values,
                             std::vector<absl::StatusCode>* codes) {
  std::lock_guard lock(mu_);
  absl::StatusOr<std::vector<shm::Location>> pinned = Pin(names);
  if (!pinned.ok()) return pinned.status();
  values->resize(names.size());
  codes->assign(names.size(), absl::StatusCode::kNotFound);
  std::vector<uint32_t> handles;
  absl::Status refused;
  for (size_t i = 0; i < names.size(); ++i) {
    const shm::Location& l = (*pinned)[i];
    if (l.status != 0) {
      const auto code = static_cast<absl::StatusCode>(l.status);
      if (code != absl::StatusCode::kNotFound && refused.ok()) {
        refused = absl::Status(code, fmt::format("the storage node refused to pin object {} of "
                                                 "the batch (shm get)", i));
      }
      continue;
    }
    (*codes)[i] = absl::StatusCode::kOk;
    (*values)[i].resize(l.size);
    if (l.size > 0) std::memcpy((*values)[i].data(), At(l), l.size);
    handles.push_back(l.handle);
  }
  // A failed release breaks the channel (the node then frees the pins), the bytes are copied.
  (void)Release(handles);
  return refused;
}

}  // namespace myriad::kvstore
