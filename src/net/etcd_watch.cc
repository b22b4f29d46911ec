#include "net/etcd_watch.h"

#include <fmt/format.h>

#include <atomic>
#include <mutex>
#include <nlohmann/json.hpp>

#include "absl/strings/escaping.h"
#include "net/async_http_client.h"
#include "net/json_text.h"

namespace myriad::net {

using json = nlohmann::json;

struct EtcdWatch::Impl {
  AsyncHttpClient client{AsyncHttpClientOptions{.threads = 1}};
  std::mutex mu;
  std::shared_ptr<Call> call;
  // Per stream: its callbacks and state live in a shared block the io callbacks hold.
  struct Stream {
    EtcdWatchCallbacks cb;
    LineSplitter splitter;
    std::atomic<bool> active{true};
    bool ended = false;  // io thread only
    void End(absl::Status st) {
      if (ended) return;
      ended = true;
      active = false;
      if (cb.on_end) cb.on_end(std::move(st));
    }
  };
  std::shared_ptr<Stream> stream;
};

EtcdWatch::EtcdWatch() : impl_(std::make_unique<Impl>()) {}
EtcdWatch::~EtcdWatch() { Stop(); }

bool EtcdWatch::active() const {
  std::lock_guard lock(impl_->mu);
  return impl_->stream != nullptr && impl_->stream->active.load();
}

absl::Status EtcdWatch::Start(std::string_view endpoint, std::string_view key,
                              int64_t start_revision, EtcdWatchCallbacks callbacks,
                              Nanos connect_timeout) {
  auto server = ParseHttpUrl(endpoint);
  if (!server.ok()) return server.status();
  Stop();
  auto stream = std::make_shared<Impl::Stream>();
  stream->cb = std::move(callbacks);
  json create = {{"key", absl::Base64Escape(std::string(key))}};
  if (start_revision > 0) create["start_revision"] = std::to_string(start_revision);
  CallRequest req;
  req.server = *server;
  req.target = "/v3/watch";
  req.body = net::JsonText(json({{"create_request", create}}));
  req.timeouts.connect = connect_timeout;
  req.timeouts.first_byte = 5 * kSecond;
  // A quiet key is the normal case: no idle limit beyond an hour (a dead etcd closes the
  // connection, or the caller's keepalives notice it first).
  req.timeouts.idle = 3600 * kSecond;
  req.max_response_bytes = ~size_t{0};
  CallCallbacks cbs;
  cbs.on_header = [stream](int status, const Headers&) {
    if (status != 200) stream->End(absl::UnavailableError(fmt::format("etcd watch: HTTP {}", status)));
  };
  cbs.on_data = [stream](std::string_view data) {
    if (stream->ended) return;
    auto lines = stream->splitter.Feed(data);
    if (!lines.ok()) return stream->End(lines.status());
    for (const std::string& line : *lines) {
      auto m = DecodeWatchLine(line);
      if (!m.ok()) return stream->End(m.status());
      if (m->canceled) {
        return stream->End(absl::AbortedError(
            fmt::format("etcd watch canceled by the server: {}", m->cancel_reason)));
      }
      for (const EtcdWatchEvent& e : m->events) {
        if (stream->cb.on_event) stream->cb.on_event(e);
      }
    }
  };
  cbs.on_done = [stream](absl::Status st, CallStage) {
    stream->End(st.ok() ? absl::UnavailableError("etcd watch: the stream ended") : st);
  };
  std::lock_guard lock(impl_->mu);
  impl_->stream = stream;
  impl_->call = impl_->client.Start(std::move(req), std::move(cbs));
  return absl::OkStatus();
}

void EtcdWatch::Stop() {
  std::shared_ptr<Call> call;
  {
    std::lock_guard lock(impl_->mu);
    call = std::move(impl_->call);
    if (impl_->stream) impl_->stream->active = false;
    impl_->stream.reset();
  }
  if (call) call->Cancel();
}

}  // namespace myriad::net
