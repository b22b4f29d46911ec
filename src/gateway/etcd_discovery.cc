#include "gateway/etcd_discovery.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <thread>

#include "absl/strings/escaping.h"
#include "gateway/etcd_codec.h"
#include "net/async_http_client.h"
#include "net/http.h"
#include "net/json_text.h"

namespace myriad::gateway {

using json = nlohmann::json;

namespace {

// What one call has delivered so far; shared with its io-thread callbacks, guarded by Impl::mu.
struct Inbox {
  bool streaming = false;
  LineSplitter splitter;            // io thread only (a call's callbacks never overlap)
  std::deque<std::string> lines;    // streaming: complete lines not yet taken
  std::string body;                 // not streaming: the whole body
  int http_status = 0;
  bool done = false;
  absl::Status status;
  std::shared_ptr<net::Call> call;
};

std::chrono::nanoseconds Dur(Nanos n) { return std::chrono::nanoseconds(n); }

}  // namespace

struct EtcdDiscovery::Impl {
  EtcdDiscoveryOptions opt;
  EtcdDiscoveryCallbacks cb;
  net::HostPort server;
  std::string key_b64, range_end_b64;
  std::unique_ptr<net::AsyncHttpClient> client;
  std::thread thread;

  mutable std::mutex mu;
  std::condition_variable cv;
  bool stopping = false;
  bool synced = false;
  EtcdDiscoveryStats stats;

  // Discovery thread only: what has been delivered, so a re-list or a repeated put delivers
  // only differences and a delete (which carries no value) knows the name.
  struct Delivered {
    std::string name;
    std::string value;
  };
  std::map<std::string, Delivered> by_key;
  std::map<std::string, std::string> key_by_name;
  std::minstd_rand rng{std::random_device{}()};

  void Run();
  absl::StatusOr<EtcdRange> List();
  absl::Status Watch(int64_t start_revision);
  std::shared_ptr<Inbox> Begin(std::string target, std::string body, bool streaming,
                               net::CallTimeouts timeouts);
  void Reconcile(const EtcdRange& range);
  void Put(const std::string& key, const std::string& value);
  void Delete(const std::string& key);
  void Error(absl::Status st);
  bool Sleep(Nanos d);  // false when stopping
};

std::shared_ptr<Inbox> EtcdDiscovery::Impl::Begin(std::string target, std::string body,
                                                  bool streaming, net::CallTimeouts timeouts) {
  auto inbox = std::make_shared<Inbox>();
  inbox->streaming = streaming;
  net::CallRequest req;
  req.server = server;
  req.target = std::move(target);
  req.body = std::move(body);
  req.timeouts = timeouts;
  req.max_response_bytes = streaming ? ~size_t{0} : size_t{256} << 20;
  net::CallCallbacks cbs;
  cbs.on_header = [this, inbox](int status, const net::Headers&) {
    std::lock_guard l(mu);
    inbox->http_status = status;
  };
  cbs.on_data = [this, inbox](std::string_view data) {
    if (!inbox->streaming) {
      std::lock_guard l(mu);
      inbox->body.append(data);
      return;
    }
    auto lines = inbox->splitter.Feed(data);
    std::lock_guard l(mu);
    if (!lines.ok()) {
      inbox->status = lines.status();
      inbox->done = true;
      if (inbox->call) inbox->call->Cancel();
    } else {
      for (auto& line : *lines) inbox->lines.push_back(std::move(line));
    }
    cv.notify_all();
  };
  cbs.on_done = [this, inbox](absl::Status st, net::CallStage) {
    std::lock_guard l(mu);
    if (!inbox->done) inbox->status = std::move(st);
    inbox->done = true;
    cv.notify_all();
  };
  auto call = client->Start(std::move(req), std::move(cbs));
  std::lock_guard l(mu);
  inbox->call = std::move(call);
  return inbox;
}

absl::StatusOr<EtcdRange> EtcdDiscovery::Impl::List() {
  net::CallTimeouts t;
  t.connect = opt.connect_timeout;
  t.first_byte = t.idle = t.total = opt.request_timeout;
  auto inbox = Begin("/v3/kv/range", net::JsonText(json({{"key", key_b64}, {"range_end", range_end_b64}})),
                     /*streaming=*/false, t);
  std::unique_lock lk(mu);
  cv.wait(lk, [&] { return stopping || inbox->done; });
  if (!inbox->done) {
    inbox->call->Cancel();
    return absl::CancelledError("etcd discovery stopped");
  }
  if (!inbox->status.ok()) return inbox->status;
  if (inbox->http_status != 200) {
    return absl::UnavailableError(fmt::format("etcd range {}: HTTP {}: {}", opt.endpoint,
                                              inbox->http_status, inbox->body.substr(0, 200)));
  }
  std::string body = std::move(inbox->body);
  lk.unlock();
  return DecodeRange(body);
}

absl::Status EtcdDiscovery::Impl::Watch(int64_t start_revision) {
  net::CallTimeouts t;
  t.connect = opt.connect_timeout;
  t.first_byte = opt.request_timeout;
  t.idle = opt.watch_idle_timeout;
  json create = {{"key", key_b64},
                 {"range_end", range_end_b64},
                 {"start_revision", start_revision},
                 {"progress_notify", true}};
  auto inbox = Begin("/v3/watch", net::JsonText(json({{"create_request", create}})), /*streaming=*/true, t);
  {
    std::lock_guard l(mu);
    stats.watches++;
  }
  while (true) {
    std::deque<std::string> lines;
    absl::Status done_status;
    bool done = false;
    int http_status = 0;
    {
      std::unique_lock lk(mu);
      cv.wait(lk, [&] { return stopping || inbox->done || !inbox->lines.empty(); });
      if (stopping) {
        inbox->call->Cancel();
        return absl::CancelledError("etcd discovery stopped");
      }
      lines.swap(inbox->lines);
      done = inbox->done;
      done_status = inbox->status;
      http_status = inbox->http_status;
    }
    for (const std::string& line : lines) {
      auto m = DecodeWatchLine(line);
      if (!m.ok() || m->canceled) {
        inbox->call->Cancel();
        if (!m.ok()) return m.status();
        return absl::AbortedError(fmt::format("etcd watch canceled by the server: {}", m->cancel_reason));
      }
      for (const EtcdWatchEvent& e : m->events) {
        if (e.is_delete) Delete(e.kv.key);
        else Put(e.kv.key, e.kv.value);
      }
      std::lock_guard l(mu);
      stats.revision = std::max(stats.revision, m->revision);
    }
    if (done) {
      if (!done_status.ok()) return done_status;
      if (http_status != 200) return absl::UnavailableError(fmt::format("etcd watch: HTTP {}", http_status));
      return absl::UnavailableError("etcd watch: the stream ended");
    }
  }
}

void EtcdDiscovery::Impl::Reconcile(const EtcdRange& range) {
  std::set<std::string> present;
  for (const EtcdKv& kv : range.kvs) present.insert(kv.key);
  // Deletes first, so a name that moved to another key is free for it.
  std::vector<std::string> gone;
  for (const auto& [key, d] : by_key) {
    if (!present.contains(key)) gone.push_back(key);
  }
  for (const std::string& key : gone) Delete(key);
  for (const EtcdKv& kv : range.kvs) Put(kv.key, kv.value);
  std::lock_guard l(mu);
  stats.lists++;
  stats.revision = std::max(stats.revision, range.revision);
}

void EtcdDiscovery::Impl::Put(const std::string& key, const std::string& value) {
  auto it = by_key.find(key);
  if (it != by_key.end() && it->second.value == value) return;  // a re-list: nothing new
  auto b = DecodeRegistration(key, value);
  // An invalid update leaves the last valid registration in place: a typo in etcd should not
  // take a serving backend out of rotation.
  if (!b.ok()) return Error(b.status());
  if (auto o = key_by_name.find(b->name); o != key_by_name.end() && o->second != key) {
    return Error(absl::AlreadyExistsError(fmt::format(
        "etcd key '{}': name: '{}' is already registered by key '{}'", key, b->name, o->second)));
  }
  if (it != by_key.end() && it->second.name != b->name) Delete(key);  // renamed
  by_key[key] = Delivered{b->name, value};
  key_by_name[b->name] = key;
  {
    std::lock_guard l(mu);
    stats.puts++;
  }
  if (cb.on_put) cb.on_put(*std::move(b));
}

void EtcdDiscovery::Impl::Delete(const std::string& key) {
  auto it = by_key.find(key);
  if (it == by_key.end()) return;  // never delivered (invalid, or deleted twice)
  const std::string name = it->second.name;
  key_by_name.erase(name);
  by_key.erase(it);
  {
    std::lock_guard l(mu);
    stats.deletes++;
  }
  if (cb.on_delete) cb.on_delete(name);
}

void EtcdDiscovery::Impl::Error(absl::Status st) {
  {
    std::lock_guard l(mu);
    stats.errors++;
  }
  if (cb.on_error) cb.on_error(std::move(st));
}

bool EtcdDiscovery::Impl::Sleep(Nanos d) {
  std::unique_lock lk(mu);
  return !cv.wait_for(lk, Dur(d), [&] { return stopping; });
}

void EtcdDiscovery::Impl::Run() {
  Nanos backoff = opt.initial_backoff;
  // Full jitter, so gateways that lost the same etcd do not come back in lockstep.
  auto next_delay = [&] {
    std::uniform_int_distribution<Nanos> d(backoff / 2, backoff);
    const Nanos delay = d(rng);
    backoff = std::min(backoff * 2, opt.max_backoff);
    return delay;
  };
  while (true) {
    auto range = List();
    if (!range.ok()) {
      if (range.status().code() == absl::StatusCode::kCancelled) return;
      Error(range.status());
      if (!Sleep(next_delay())) return;
      continue;
    }
    backoff = opt.initial_backoff;
    Reconcile(*range);
    {
      std::lock_guard l(mu);
      synced = true;
      cv.notify_all();
    }
    absl::Status st = Watch(range->revision + 1);
    if (st.code() == absl::StatusCode::kCancelled) {
      std::lock_guard l(mu);
      if (stopping) return;
    }
    Error(st);
    if (!Sleep(next_delay())) return;
  }
}

EtcdDiscovery::EtcdDiscovery() = default;
EtcdDiscovery::~EtcdDiscovery() { Stop(); }

absl::Status EtcdDiscovery::Start(EtcdDiscoveryOptions options, EtcdDiscoveryCallbacks callbacks) {
  if (impl_) return absl::FailedPreconditionError("etcd discovery: already started");
  auto server = net::ParseHttpUrl(options.endpoint);
  if (!server.ok()) {
    return absl::InvalidArgumentError(
        fmt::format("etcd_endpoint: '{}': {}", options.endpoint, std::string(server.status().message())));
  }
  if (options.prefix.empty()) return absl::InvalidArgumentError("etcd_prefix: required");
  if (options.initial_backoff <= 0 || options.max_backoff < options.initial_backoff) {
    return absl::InvalidArgumentError("etcd backoff: need 0 < initial_backoff <= max_backoff");
  }
  if (options.connect_timeout <= 0 || options.request_timeout <= 0 ||
      options.watch_idle_timeout <= 0) {
    return absl::InvalidArgumentError("etcd timeouts: must be positive");
  }
  auto impl = std::make_unique<Impl>();
  impl->opt = std::move(options);
  impl->cb = std::move(callbacks);
  impl->server = *server;
  impl->key_b64 = absl::Base64Escape(impl->opt.prefix);
  impl->range_end_b64 = absl::Base64Escape(EtcdPrefixRangeEnd(impl->opt.prefix));
  impl->client = std::make_unique<net::AsyncHttpClient>(net::AsyncHttpClientOptions{.threads = 1});
  impl_ = std::move(impl);
  impl_->thread = std::thread([this] { impl_->Run(); });
  return absl::OkStatus();
}

void EtcdDiscovery::Stop() {
  if (!impl_) return;
  {
    std::lock_guard l(impl_->mu);
    impl_->stopping = true;
    impl_->cv.notify_all();
  }
  if (impl_->thread.joinable()) impl_->thread.join();
  impl_->client.reset();  // after the thread: no call outlives the callbacks' captures
  impl_.reset();
}

bool EtcdDiscovery::WaitSynced(Nanos timeout) {
  if (!impl_) return false;
  std::unique_lock lk(impl_->mu);
  return impl_->cv.wait_for(lk, Dur(timeout), [&] { return impl_->synced || impl_->stopping; }) &&
         impl_->synced;
}

EtcdDiscoveryStats EtcdDiscovery::stats() const {
  if (!impl_) return {};
  std::lock_guard l(impl_->mu);
  return impl_->stats;
}

}  // namespace myriad::gateway
