#include "cli/trace_replay.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <fstream>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "cli/loadgen.h"
#include "core/rng.h"
#include "core/strings.h"
#include "net/async_http_client.h"
#include "net/http.h"

namespace myriad::cli {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

std::string TraceRequestBody(const sim::TraceRecord& record, uint64_t index, std::string_view model) {
  const std::vector<uint32_t> ids = sim::TracePromptIds(record, index);
  std::string b = fmt::format(R"({{"model":{},"prompt":[)", json(model).dump());
  b.reserve(b.size() + ids.size() * 6 + 96);
  char num[16];
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i > 0) b += ',';
    auto [end, ec] = std::to_chars(num, num + sizeof(num), ids[i]);
    b.append(num, end);
  }
  fmt::format_to(std::back_inserter(b), R"(],"max_tokens":{},"stream":true,"stream_options":{{"include_usage":true}}}})",
                 std::max<int32_t>(record.output_tokens, 1));
  return b;
}

absl::Status CheckTraceSize(const std::string& path, std::string_view format) {
  std::ifstream in(path);
  if (!in.is_open()) return absl::OkStatus();  // LoadTraceFile names the file and the reason
  const int64_t allowed = kMaxReplayRecords + (EqualsIgnoreCase(format, "azure") ? 1 : 0);  // the header
  std::string line;
  int64_t line_no = 0, records = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (!StripWhitespace(line).empty() && ++records > allowed) {
      return absl::InvalidArgumentError(fmt::format(
          "{}:{}: more than {} records: loadgen --trace replays at most that many", path, line_no, kMaxReplayRecords));
    }
  }
  return absl::OkStatus();
}

std::string ErrorReason(std::string_view body) {
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_object() && j.contains("error") && j["error"].is_object()) {
    const json& e = j["error"];
    auto text = [&e](const char* key) { return e.contains(key) && e[key].is_string() ? e[key].get<std::string>() : ""; };
    const std::string type = text("type"), message = text("message");
    return type.empty() ? message : message.empty() ? type : type + ": " + message;
  }
  return std::string(body.substr(0, 200));
}

uint64_t ReplayReport::ok() const {
  auto it = outcomes.find("200");
  return it == outcomes.end() ? 0 : it->second;
}

double ReplayReport::prefix_hit_rate() const {
  return prompt_tokens > 0 ? static_cast<double>(cached_tokens) / static_cast<double>(prompt_tokens) : 0;
}

namespace {

std::string OutcomeList(const std::map<std::string, uint64_t>& outcomes) {
  std::string s;
  for (const auto& [kind, count] : outcomes) s += fmt::format("{}{} {}", s.empty() ? "" : ", ", kind, count);
  return s;
}

}  // namespace

std::string ReplayReport::Table() const {
  std::string t = fmt::format("myriad loadgen: {}{}\ntrace {}: {} records, time scale {:g}, at most {} in flight\n",
                              options.url, options.path, trace, entries.size(), options.time_scale,
                              options.concurrency);
  auto row = [&t](std::string_view name, const std::string& value) { t += fmt::format("  {:<22} {}\n", name, value); };
  row("requests", fmt::format("{} sent, {} delayed by the cap", entries.size(), delayed));
  row("status", OutcomeList(outcomes));
  row("elapsed", fmt::format("{:.3f} s", elapsed_s));
  row("ttft ms", fmt::format("p50 {:.3f}  p99 {:.3f}", ttft_ms.Quantile(0.5), ttft_ms.Quantile(0.99)));
  row("prefix hit rate", fmt::format("{:.1f}% ({} of {} prompt tokens cached)", 100 * prefix_hit_rate(),
                                     cached_tokens, prompt_tokens));
  return t;
}

std::string ReplayReport::Json() const {
  json j;
  j["settings"] = {{"url", options.url}, {"path", options.path}, {"model", options.model},
                   {"trace", trace}, {"time_scale", options.time_scale}, {"concurrency", options.concurrency}};
  j["requests"] = {{"sent", entries.size()}, {"ok", ok()}, {"delayed", delayed}};
  j["status"] = json::object();
  for (const auto& [kind, count] : outcomes) j["status"][kind] = count;
  j["elapsed_s"] = elapsed_s;
  j["ttft_ms"] = {{"count", ttft_ms.count()}, {"p50", ttft_ms.Quantile(0.5)}, {"p99", ttft_ms.Quantile(0.99)}};
  j["prefix"] = {{"prompt_tokens", prompt_tokens}, {"cached_tokens", cached_tokens}, {"hit_rate", prefix_hit_rate()}};
  return j.dump(2);
}

std::string ReplayReport::Log() const {
  std::string out;
  for (const ReplayEntry& e : entries) {
    json j = {{"index", e.index},         {"scheduled_s", e.scheduled_s},     {"sent_s", e.sent_s},
              {"delayed", e.delayed},     {"status", e.status},               {"backend", e.backend}, {"prefill_backend", e.prefill_backend},
              {"ttft_s", e.ttft_s},       {"e2e_s", e.e2e_s},                 {"prompt_tokens", e.prompt_tokens},
              {"cached_tokens", e.cached_tokens}, {"output_tokens", e.output_tokens}, {"error", e.error}};
    out += j.dump();
    out += '\n';
  }
  return out;
}

namespace {

// One replay: arrivals on the trace's schedule, at most `concurrency` in flight.
class Replayer {
 public:
  Replayer(const std::vector<sim::TraceRecord>& records, const ReplayOptions& o, net::AsyncHttpClient* client,
           net::HostPort server)
      : records_(records), o_(o), client_(client), server_(std::move(server)) {
    report_.options = o;
    report_.entries.resize(records.size());
  }

  ReplayReport Run() {
    start_ = Clock::now();
    last_done_ = start_;
    for (size_t i = 0; i < records_.size(); ++i) {
      ReplayEntry& e = report_.entries[i];  // its call writes it only after Launch, under mu_
      e.index = i;
      e.scheduled_s = static_cast<double>(records_[i].offset) / 1e9 / o_.time_scale;
      std::this_thread::sleep_until(start_ + std::chrono::duration_cast<Clock::duration>(
                                                 std::chrono::duration<double>(e.scheduled_s)));
      {
        std::unique_lock l(mu_);
        if (inflight_ >= o_.concurrency) {
          e.delayed = true;
          ++report_.delayed;
          cv_.wait(l, [this] { return inflight_ < o_.concurrency; });
        }
        ++inflight_;
      }
      Launch(i);
    }
    std::unique_lock l(mu_);
    cv_.wait(l, [this] { return inflight_ == 0; });
    report_.elapsed_s = Seconds(last_done_ - start_);
    return std::move(report_);
  }

 private:
  void Launch(size_t index) {
    const auto sent = Clock::now();
    {
      std::lock_guard l(mu_);
      report_.entries[index].sent_s = Seconds(sent - start_);
    }
    StartTimedCall(*client_, {.server = &server_, .path = o_.path, .api_key = KeyOf(records_[index]), .timeout = o_.timeout,
                              .stream = true},
                   index, TraceRequestBody(records_[index], index, o_.model),
                   [this](TimedCall& s, const absl::Status& st, net::CallStage stage) { Done(s, st, stage); });
  }

  // A record's tenant speaks with that tenant's key; tenants past the list use --api-key.
  const std::string& KeyOf(const sim::TraceRecord& r) const {
    return r.tenant < o_.tenant_keys.size() ? o_.tenant_keys[r.tenant] : o_.api_key;
  }

  void Done(const TimedCall& s, const absl::Status& st, net::CallStage stage) {
    const auto now = Clock::now();
    std::string outcome;
    std::string error;
    if (s.status != 0 && s.status != 200) {
      outcome = std::to_string(s.status);
      error = ErrorReason(s.body);
    } else if (!st.ok()) {
      outcome = CallFailureKind(st, stage);
      error = std::string(st.message());
    } else if (!s.sse.done()) {
      outcome = "stream_without_done";
      error = outcome;
    } else {
      outcome = "200";
    }
    std::lock_guard l(mu_);
    ReplayEntry& e = report_.entries[s.index];
    e.status = s.status;
    e.backend = s.backend;
    e.prefill_backend = s.prefill_backend;
    e.error = error;
    e.e2e_s = Seconds(now - s.start);
    if (outcome == "200") {
      if (s.has_first) {
        e.ttft_s = Seconds(s.first - s.start);
        report_.ttft_ms.Add(e.ttft_s * 1e3);
      }
      e.output_tokens = s.sse.tokens();
      e.prompt_tokens = s.sse.prompt_tokens();
      e.cached_tokens = s.sse.cached_tokens();
      // P/D: the prefill engine's cache, not the decode engine's count of the KV it received.
      if (s.prefill_cached_tokens >= 0) e.cached_tokens = s.prefill_cached_tokens;
      if (e.prompt_tokens >= 0) {
        report_.prompt_tokens += e.prompt_tokens;
        report_.cached_tokens += std::max<int64_t>(e.cached_tokens, 0);
      }
    }
    ++report_.outcomes[outcome];
    last_done_ = std::max(last_done_, now);
    --inflight_;
    cv_.notify_all();
  }

  const std::vector<sim::TraceRecord>& records_;
  const ReplayOptions o_;
  net::AsyncHttpClient* client_;
  const net::HostPort server_;
  Clock::time_point start_;

  std::mutex mu_;
  std::condition_variable cv_;
  int inflight_ = 0;
  Clock::time_point last_done_;
  ReplayReport report_;
};

}  // namespace

absl::Status ValidateReplayOptions(const ReplayOptions& o) {
  if (!(o.time_scale >= kMinTimeScale && o.time_scale <= kMaxTimeScale)) {
    return absl::InvalidArgumentError(
        fmt::format("--time-scale: must be in [{:g}, {:g}], got {:g}", kMinTimeScale, kMaxTimeScale, o.time_scale));
  }
  if (o.concurrency < 1 || o.concurrency > 100'000) return absl::InvalidArgumentError("--concurrency: must be in [1, 100000]");
  if (o.timeout <= 0) return absl::InvalidArgumentError("--timeout: must be > 0");
  return net::ParseHttpUrl(o.url).status();
}

absl::StatusOr<ReplayReport> RunReplay(const std::vector<sim::TraceRecord>& records, const ReplayOptions& o,
                                       net::AsyncHttpClient* client) {
  if (absl::Status st = ValidateReplayOptions(o); !st.ok()) return st;
  if (static_cast<int64_t>(records.size()) > kMaxReplayRecords) {
    return absl::InvalidArgumentError(fmt::format("the trace has more than {} records", kMaxReplayRecords));
  }
  const double span_s = records.empty() ? 0 : NanosToSeconds(records.back().offset) / o.time_scale;
  if (!(span_s <= kMaxReplaySeconds)) {
    return absl::InvalidArgumentError(fmt::format(
        "--time-scale: the trace would take {:.3g} s to replay at {:g}, more than the bound of {:g} s", span_s,
        o.time_scale, kMaxReplaySeconds));
  }
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
  Replayer replayer(records, o, client, *server);
  return replayer.Run();
}

}  // namespace myriad::cli
