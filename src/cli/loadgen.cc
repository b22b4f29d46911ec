#include "cli/loadgen.h"

#include <fmt/format.h>

#include <charconv>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "absl/strings/ascii.h"
#include "core/rng.h"
#include "net/async_http_client.h"
#include "net/http.h"

namespace myriad::cli {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

constexpr uint64_t kWordChoices = 10000;

void AppendWords(Rng& r, int n, std::string* out) {
  for (int i = 0; i < n; ++i) {
    out->append(" w");
    out->append(std::to_string(r.Below(kWordChoices)));
  }
}

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

}  // namespace

absl::Status ValidateLoadgenOptions(const LoadgenOptions& o) {
  auto bad = [](std::string_view flag, std::string_view why) {
    return absl::InvalidArgumentError(fmt::format("{}: {}", flag, why));
  };
  if (absl::StatusOr<net::HostPort> hp = net::ParseHttpUrl(o.url); !hp.ok()) {
    return bad("--url", std::string(hp.status().message()));
  }
  if (o.path.empty() || o.path[0] != '/') return bad("--path", fmt::format("'{}' must start with '/'", o.path));
  if (o.model.empty()) return bad("--model", "must not be empty");
  // Upper bounds: each is far past any real run and keeps a typo from exhausting memory.
  if (o.concurrency < 1 || o.concurrency > 100'000) return bad("--concurrency", "must be in [1, 100000]");
  if (o.duration < 0) return bad("--duration", "must be >= 0");
  if (o.requests < 0) return bad("--requests", "must be >= 0");
  if (o.duration == 0 && o.requests == 0) return bad("--duration", "give a duration > 0 or --requests > 0");
  if (!(o.rate >= 0 && o.rate <= 1e6)) return bad("--rate", "must be in [0, 1e6] (0: closed loop)");
  if (o.max_tokens < 1 || o.max_tokens > (1 << 20)) return bad("--max-tokens", "must be in [1, 1048576]");
  if (o.prompt_words < 1 || o.prompt_words > 1'000'000) return bad("--prompt-words", "must be in [1, 1000000]");
  if (o.shared_prefix_words < 0 || o.shared_prefix_words > 1'000'000) {
    return bad("--shared-prefix-words", "must be in [0, 1000000]");
  }
  if (o.prefix_groups < 1 || o.prefix_groups > 100'000) return bad("--prefix-groups", "must be in [1, 100000]");
  if (static_cast<int64_t>(o.prefix_groups) * o.shared_prefix_words > 10'000'000) {
    return bad("--shared-prefix-words", "times --prefix-groups must be at most 10000000 words");
  }
  if (o.threads < 1 || o.threads > 1024) return bad("--threads", "must be in [1, 1024]");
  if (o.timeout <= 0) return bad("--timeout", "must be > 0");
  return absl::OkStatus();
}

BodyMaker::BodyMaker(const LoadgenOptions& o) : o_(o) {
  if (o_.shared_prefix_words > 0) {
    const Rng base = Rng(o_.seed).Fork(2);
    for (int g = 0; g < o_.prefix_groups; ++g) {
      Rng r = base.Fork(static_cast<uint64_t>(g));
      std::string p;
      AppendWords(r, o_.shared_prefix_words, &p);
      prefixes_.push_back(std::move(p));
    }
  }
}

int BodyMaker::Group(uint64_t index) const {
  Rng r = Rng(o_.seed).Fork(1).Fork(index);
  return static_cast<int>(r.Below(static_cast<uint64_t>(o_.prefix_groups)));
}

std::string BodyMaker::Prompt(uint64_t index) const {
  Rng r = Rng(o_.seed).Fork(1).Fork(index);
  const auto group = r.Below(static_cast<uint64_t>(o_.prefix_groups));  // first draw: Group()
  std::string p = prefixes_.empty() ? std::string() : prefixes_[group];
  AppendWords(r, o_.prompt_words, &p);
  return p.substr(1);  // the leading space of the first word
}

std::string BodyMaker::Body(uint64_t index) const {
  // The prompt is words of [ w0-9] only, so it needs no escaping; the model may.
  std::string b = fmt::format(R"({{"model":{},"prompt":"{}","max_tokens":{},"stream":{})",
                              json(o_.model).dump(), Prompt(index), o_.max_tokens,
                              o_.stream ? "true" : "false");
  if (o_.stream) b += R"(,"stream_options":{"include_usage":true})";
  b += "}";
  return b;
}

void SseTokenCounter::Feed(std::string_view data) {
  pending_.append(data);
  size_t start = 0;
  for (;;) {
    size_t end = pending_.find("\n\n", start);
    if (end == std::string::npos) break;
    Event(std::string_view(pending_).substr(start, end - start));
    start = end + 2;
  }
  pending_.erase(0, start);
}

void SseTokenCounter::Event(std::string_view event) {
  // One "data: ..." line per event from OpenAI servers; comments and other fields are skipped.
  constexpr std::string_view kData = "data:";
  if (event.substr(0, kData.size()) != kData) return;
  std::string_view payload = event.substr(kData.size());
  if (!payload.empty() && payload[0] == ' ') payload.remove_prefix(1);
  if (payload == "[DONE]") {
    done_ = true;
    return;
  }
  if (payload.find("\"finish_reason\":null") != std::string_view::npos) ++chunks_;
  if (payload.find("\"usage\":{") != std::string_view::npos) {
    const Usage u = ParseUsage(payload);
    if (u.completion >= 0) usage_ = u;
  }
}

Usage ParseUsage(std::string_view body) {
  Usage out;
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("usage") || !j["usage"].is_object()) return out;
  const json& u = j["usage"];
  auto count = [](const json& obj, const char* key) {
    return obj.contains(key) && obj[key].is_number_integer() ? obj[key].get<int64_t>() : int64_t{-1};
  };
  out.completion = count(u, "completion_tokens");
  out.prompt = count(u, "prompt_tokens");
  if (u.contains("prompt_tokens_details") && u["prompt_tokens_details"].is_object()) {
    out.cached = count(u["prompt_tokens_details"], "cached_tokens");
  }
  return out;
}

std::string CallFailureKind(const absl::Status& status, net::CallStage stage) {
  return fmt::format("{}_{}", net::CallStageName(stage), absl::AsciiStrToLower(absl::StatusCodeToString(status.code())));
}

void StartTimedCall(net::AsyncHttpClient& client, const CallTarget& target, uint64_t index, std::string body,
                    TimedCallDone done) {
  auto s = std::make_shared<TimedCall>();
  s->index = index;
  net::CallRequest req;
  req.server = *target.server;
  req.target = std::string(target.path);
  req.body = std::move(body);
  if (!target.api_key.empty()) req.headers.emplace_back("Authorization", "Bearer " + std::string(target.api_key));
  req.timeouts.first_byte = target.timeout;
  req.timeouts.idle = target.timeout;
  req.timeouts.total = target.timeout;
  net::CallCallbacks cb;
  cb.on_header = [s](int status, const net::Headers& headers) {
    s->status = status;
    if (const std::string* b = net::FindHeader(headers, "X-Myriad-Backend")) s->backend = *b;
    if (const std::string* b = net::FindHeader(headers, "X-Myriad-Prefill-Backend")) s->prefill_backend = *b;
    if (const std::string* b = net::FindHeader(headers, "X-Myriad-Prefill-Cached-Tokens")) {
      int64_t v = -1;
      if (std::from_chars(b->data(), b->data() + b->size(), v).ec == std::errc() && v >= 0) s->prefill_cached_tokens = v;
    }
  };
  cb.on_data = [s, stream = target.stream](std::string_view data) {
    if (data.empty()) return;
    if (!s->has_first) {
      s->has_first = true;
      s->first = Clock::now();
    }
    if (stream && s->status == 200) {
      s->sse.Feed(data);
    } else if (s->body.size() < (size_t{1} << 20)) {
      s->body.append(data);
    }
  };
  cb.on_done = [s, done = std::move(done)](absl::Status st, net::CallStage stage) { done(*s, st, stage); };
  s->start = Clock::now();
  client.Start(std::move(req), std::move(cb));
}

int64_t UsageCompletionTokens(std::string_view body) { return ParseUsage(body).completion; }

uint64_t LoadReport::error_count() const {
  uint64_t n = 0;
  for (const auto& [kind, count] : errors) n += count;
  return n;
}

namespace {

std::string ModeLine(const LoadgenOptions& o) {
  std::string bound;
  if (o.duration > 0) bound = FormatDuration(o.duration);
  if (o.requests > 0) bound += fmt::format("{}{} requests", bound.empty() ? "" : " or ", o.requests);
  const std::string loop = o.rate > 0 ? fmt::format("open loop {:g} req/s, at most {} in flight", o.rate, o.concurrency)
                                      : fmt::format("closed loop, concurrency {}", o.concurrency);
  return fmt::format("{}, {}, {} tokens {}, prompt {} + {} shared words in {} groups, seed {}",
                     loop, bound, o.max_tokens, o.stream ? "streamed" : "not streamed",
                     o.prompt_words, o.shared_prefix_words, o.prefix_groups, o.seed);
}

}  // namespace

std::string LoadReport::Table() const {
  const double secs = elapsed_s > 0 ? elapsed_s : 1;
  std::string errs;
  for (const auto& [kind, count] : errors) errs += fmt::format("{}{} {}", errs.empty() ? "" : ", ", kind, count);
  std::string t = fmt::format("myriad loadgen: {}{}\n{}\n", options.url, options.path, ModeLine(options));
  auto row = [&t](std::string_view name, const std::string& value) {
    t += fmt::format("  {:<22} {}\n", name, value);
  };
  row("requests", fmt::format("{} sent, {} ok, {} errors{}", sent, ok, error_count(),
                              errs.empty() ? "" : " (" + errs + ")"));
  if (options.rate > 0) row("not sent (limit)", std::to_string(not_sent));
  row("elapsed", fmt::format("{:.3f} s", elapsed_s));
  row("throughput", fmt::format("{:.1f} req/s, {:.0f} output tokens/s", static_cast<double>(ok) / secs,
                                static_cast<double>(output_tokens) / secs));
  row("latency ms", fmt::format("p50 {:.3f}  p90 {:.3f}  p99 {:.3f}  max {:.3f}",
                                latency_ms.Quantile(0.5), latency_ms.Quantile(0.9),
                                latency_ms.Quantile(0.99), latency_ms.Summarize().max));
  if (options.stream) {
    row("ttft ms", fmt::format("p50 {:.3f}  p90 {:.3f}  p99 {:.3f}  max {:.3f}", ttft_ms.Quantile(0.5),
                               ttft_ms.Quantile(0.9), ttft_ms.Quantile(0.99), ttft_ms.Summarize().max));
  }
  return t;
}

std::string LoadReport::Json() const {
  const double secs = elapsed_s > 0 ? elapsed_s : 1;
  auto dist = [](const Distribution& d) {
    const Summary s = d.Summarize();
    return json{{"count", s.count}, {"mean", s.mean}, {"p50", d.Quantile(0.5)}, {"p90", d.Quantile(0.9)},
                {"p99", d.Quantile(0.99)}, {"max", s.max}};
  };
  const LoadgenOptions& o = options;
  json j;
  j["settings"] = {{"url", o.url}, {"path", o.path}, {"model", o.model}, {"concurrency", o.concurrency},
                   {"duration_s", NanosToSeconds(o.duration)}, {"requests", o.requests}, {"rate", o.rate},
                   {"max_tokens", o.max_tokens}, {"stream", o.stream}, {"prompt_words", o.prompt_words},
                   {"shared_prefix_words", o.shared_prefix_words}, {"prefix_groups", o.prefix_groups},
                   {"seed", o.seed}, {"threads", o.threads}, {"timeout_s", NanosToSeconds(o.timeout)}};
  j["requests"] = {{"sent", sent}, {"ok", ok}, {"errors", error_count()}, {"not_sent", not_sent}};
  j["errors"] = json::object();
  for (const auto& [kind, count] : errors) j["errors"][kind] = count;
  j["elapsed_s"] = elapsed_s;
  j["output_tokens"] = output_tokens;
  j["throughput"] = {{"requests_per_s", static_cast<double>(ok) / secs},
                     {"output_tokens_per_s", static_cast<double>(output_tokens) / secs}};
  j["latency_ms"] = dist(latency_ms);
  if (o.stream) j["ttft_ms"] = dist(ttft_ms);
  return j.dump(2);
}

namespace {

// One run: the request indices handed out, the calls in flight, the results.
class Runner {
 public:
  Runner(const LoadgenOptions& o, net::AsyncHttpClient* client, net::HostPort server)
      : o_(o), client_(client), server_(std::move(server)), bodies_(o) {
    report_.options = o;
  }

  LoadReport Run() {
    start_ = Clock::now();
    last_done_ = start_;
    deadline_ = o_.duration > 0 ? start_ + std::chrono::nanoseconds(o_.duration) : Clock::time_point::max();
    if (o_.rate > 0) {
      OpenLoop();
    } else {
      for (int i = 0; i < o_.concurrency; ++i) {
        uint64_t index;
        {
          std::lock_guard l(mu_);
          if (!TakeIndex(Clock::now(), &index)) break;
        }
        Launch(index);
      }
    }
    std::unique_lock l(mu_);
    cv_.wait(l, [this] { return inflight_ == 0; });
    report_.elapsed_s = std::chrono::duration<double>(last_done_ - start_).count();
    return std::move(report_);
  }

 private:

  // Under mu_: the next request's index, unless a bound is reached.
  bool TakeIndex(Clock::time_point now, uint64_t* index) {
    if (o_.requests > 0 && next_ >= static_cast<uint64_t>(o_.requests)) return false;
    if (now >= deadline_) return false;
    *index = next_++;
    ++inflight_;
    ++report_.sent;
    return true;
  }

  void OpenLoop() {
    Rng r = Rng(o_.seed).Fork(3);
    auto at = start_;
    for (;;) {
      at += std::chrono::nanoseconds(SecondsToNanos(r.Exponential(o_.rate)));
      if (at >= deadline_) return;
      std::this_thread::sleep_until(at);
      uint64_t index;
      {
        std::lock_guard l(mu_);
        if (o_.requests > 0 && next_ + report_.not_sent >= static_cast<uint64_t>(o_.requests)) return;
        if (inflight_ >= o_.concurrency) {
          ++report_.not_sent;
          continue;
        }
        if (!TakeIndex(Clock::now(), &index)) return;
      }
      Launch(index);
    }
  }

  void Launch(uint64_t index) {
    StartTimedCall(*client_, {.server = &server_, .path = o_.path, .api_key = o_.api_key, .timeout = o_.timeout,
                              .stream = o_.stream},
                   index, bodies_.Body(index),
                   [this](TimedCall& s, const absl::Status& st, net::CallStage stage) { Done(s, st, stage); });
  }

  void Done(TimedCall& s, const absl::Status& st, net::CallStage stage) {
    const auto now = Clock::now();
    std::string error;
    int64_t tokens = 0;
    if (s.status != 0 && s.status != 200) {
      error = fmt::format("http_{}", s.status);
    } else if (!st.ok()) {
      error = CallFailureKind(st, stage);
    } else if (o_.stream && !s.sse.done()) {
      error = "stream_without_done";
    } else {
      tokens = o_.stream ? s.sse.tokens() : std::max<int64_t>(0, UsageCompletionTokens(s.body));
    }
    uint64_t next = 0;
    bool more = false;
    {
      std::lock_guard l(mu_);
      if (error.empty()) {
        ++report_.ok;
        report_.output_tokens += tokens;
        report_.latency_ms.Add(Ms(now - s.start));
        if (o_.stream && s.has_first) report_.ttft_ms.Add(Ms(s.first - s.start));
      } else {
        ++report_.errors[error];
      }
      last_done_ = std::max(last_done_, now);
      --inflight_;
      // Taking the next index in the same critical section keeps inflight_ from touching zero
      // between two requests of a closed loop.
      if (o_.rate <= 0) more = TakeIndex(now, &next);
      if (inflight_ == 0) cv_.notify_all();
    }
    if (more) Launch(next);
  }

  const LoadgenOptions o_;
  net::AsyncHttpClient* client_;
  const net::HostPort server_;
  const BodyMaker bodies_;
  Clock::time_point start_, deadline_;

  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t next_ = 0;
  int inflight_ = 0;
  Clock::time_point last_done_;
  LoadReport report_;
};

}  // namespace

absl::StatusOr<LoadReport> RunLoad(const LoadgenOptions& o, net::AsyncHttpClient* client) {
  if (absl::Status st = ValidateLoadgenOptions(o); !st.ok()) return st;
  absl::StatusOr<net::HostPort> server = net::ParseHttpUrl(o.url);
  if (!server.ok()) return server.status();
  std::unique_ptr<net::AsyncHttpClient> own;
  if (client == nullptr) {
    net::AsyncHttpClientOptions co;
    co.threads = o.threads;
    co.max_idle_per_server = static_cast<size_t>(o.concurrency) + 1;
    own = std::make_unique<net::AsyncHttpClient>(co);
    client = own.get();
  }
  Runner runner(o, client, *server);
  return runner.Run();
}

}  // namespace myriad::cli
