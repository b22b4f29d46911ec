#include "cli/loadgen_command.h"

#include <fmt/format.h>

#include <cstdio>
#include <fstream>

#include "cli/trace_replay.h"

namespace myriad::cli {

LoadgenCommand::LoadgenCommand(CLI::App& app) {
  cmd_ = app.add_subcommand("loadgen", "Send OpenAI completion load to an engine, the gateway or a proxy; print throughput and latency");
  cmd_->add_option("--url", o_.url, "http://HOST:PORT of the server")->capture_default_str();
  cmd_->add_option("--path", o_.path, "request target")->capture_default_str();
  cmd_->add_option("--model", o_.model, "model name in the request bodies")->capture_default_str();
  cmd_->add_option("-c,--concurrency", o_.concurrency, "requests in flight (closed loop), or their limit (open loop)")->capture_default_str();
  cmd_->add_option("--duration", duration_, "stop sending after this long, e.g. 10s (default 10s unless --requests)");
  cmd_->add_option("--requests", o_.requests, "stop after sending this many requests");
  cmd_->add_option("--rate", o_.rate, "open loop: Poisson arrivals, requests per second (0: closed loop)")->capture_default_str();
  cmd_->add_option("--max-tokens", o_.max_tokens, "max_tokens of each request")->capture_default_str();
  cmd_->add_flag("--stream", o_.stream, "streaming requests (SSE); measures TTFT");
  cmd_->add_option("--prompt-words", o_.prompt_words, "words of each request's own prompt part")->capture_default_str();
  cmd_->add_option("--shared-prefix-words", o_.shared_prefix_words, "words of the shared prefix of each group")->capture_default_str();
  cmd_->add_option("--prefix-groups", o_.prefix_groups, "number of distinct shared prefixes")->capture_default_str();
  cmd_->add_option("--seed", o_.seed, "seed of the prompts and arrivals")->capture_default_str();
  cmd_->add_option("--threads", o_.threads, "client io threads")->capture_default_str();
  cmd_->add_option("--timeout", timeout_, "limit of each request")->capture_default_str();
  cmd_->add_option("--api-key", o_.api_key,
                   "sent as 'Authorization: Bearer KEY' (a gateway tenant's key); default $OPENAI_API_KEY")
      ->envname("OPENAI_API_KEY");
  cmd_->add_flag("--json", json_, "print the report as JSON");
  cmd_->add_option("--trace", trace_,
                   fmt::format("replay this trace instead: one streamed request per record at its own offset, open loop "
                               "(at most {} records)", kMaxReplayRecords));
  cmd_->add_option("--trace-format", trace_format_, "mooncake (JSONL with hash_ids) or azure (CSV)")
      ->check(CLI::IsMember({"mooncake", "azure"}))
      ->capture_default_str();
  cmd_->add_option("--time-scale", time_scale_,
                   fmt::format("trace seconds per real second, as `myriad up --speed` (in [{:g}, {:g}])", kMinTimeScale,
                               kMaxTimeScale))
      ->capture_default_str();
  cmd_->add_option("--log", log_, "with --trace: write one JSON line per request, in trace order, to this file");
  cmd_->add_option("--tenant-keys", tenant_keys_,
                   fmt::format("with --trace: comma-separated API keys, the k-th sent by the records of trace tenant k "
                               "(a record's \"tenant\"), at most {}; other records send --api-key",
                               sim::kMaxTraceTenants))
      ->delimiter(',');
}

int LoadgenCommand::Run() {
  if (!duration_.empty()) {
    auto d = ParseDuration(duration_);
    if (!d.ok()) {
      fmt::print(stderr, "myriad loadgen: --duration: {}\n", std::string(d.status().message()));
      return 2;
    }
    o_.duration = *d;
  } else if (o_.requests > 0) {
    o_.duration = 0;  // bounded by the count alone
  }
  auto t = ParseDuration(timeout_);
  if (!t.ok()) {
    fmt::print(stderr, "myriad loadgen: --timeout: {}\n", std::string(t.status().message()));
    return 2;
  }
  o_.timeout = *t;
  if (!trace_.empty()) return RunTrace();
  if (!log_.empty() || cmd_->count("--time-scale") > 0 || cmd_->count("--trace-format") > 0 ||
      cmd_->count("--tenant-keys") > 0) {
    fmt::print(stderr, "myriad loadgen: --log, --time-scale, --trace-format and --tenant-keys need --trace\n");
    return 2;
  }
  if (absl::Status st = ValidateLoadgenOptions(o_); !st.ok()) {
    fmt::print(stderr, "myriad loadgen: {}\n", std::string(st.message()));
    return 2;
  }
  auto report = RunLoad(o_);
  if (!report.ok()) {
    fmt::print(stderr, "myriad loadgen: {}\n", std::string(report.status().message()));
    return 2;
  }
  if (json_) {
    fmt::print("{}\n", report->Json());
  } else {
    fmt::print("{}", report->Table());
  }
  std::fflush(stdout);
  // A run in which nothing succeeded is a failure of the target (or of the flags).
  return report->ok > 0 ? 0 : 1;
}

int LoadgenCommand::RunTrace() {
  auto fail = [](const std::string& message) {
    fmt::print(stderr, "myriad loadgen: {}\n", message);
    return 2;
  };
  // The trace decides arrivals, count, prompts and output lengths; a flag that would too is a
  // contradiction, not something to silently ignore.
  std::string conflicts;
  for (const char* flag : {"--rate", "--requests", "--duration", "--prompt-words", "--shared-prefix-words",
                           "--prefix-groups", "--max-tokens"}) {
    if (cmd_->count(flag) > 0) conflicts += fmt::format("{}{}", conflicts.empty() ? "" : ", ", flag);
  }
  if (!conflicts.empty()) {
    return fail(fmt::format("--trace conflicts with {}: the trace gives the arrivals, the prompts and the output lengths",
                            conflicts));
  }
  ReplayOptions ro;
  ro.url = o_.url;
  ro.path = o_.path;
  ro.model = o_.model;
  ro.api_key = o_.api_key;
  ro.concurrency = o_.concurrency;
  ro.time_scale = time_scale_;
  ro.threads = o_.threads;
  ro.timeout = o_.timeout;
  if (tenant_keys_.size() > sim::kMaxTraceTenants) {
    return fail(fmt::format("--tenant-keys: at most {} keys (one per trace tenant), got {}", sim::kMaxTraceTenants,
                            tenant_keys_.size()));
  }
  ro.tenant_keys = tenant_keys_;
  if (absl::Status st = ValidateReplayOptions(ro); !st.ok()) return fail(std::string(st.message()));
  o_.requests = 1;  // the synthetic bound is unused; this checks the flags both modes share
  if (absl::Status st = ValidateLoadgenOptions(o_); !st.ok()) return fail(std::string(st.message()));
  if (absl::Status st = CheckTraceSize(trace_, trace_format_); !st.ok()) return fail(std::string(st.message()));
  auto records = sim::LoadTraceFile(trace_, trace_format_);
  if (!records.ok()) return fail(std::string(records.status().message()));
  std::ofstream log;
  if (!log_.empty()) {
    log.open(log_, std::ios::trunc);
    if (!log.is_open()) return fail(fmt::format("--log: cannot open {} for writing", log_));
  }
  auto report = RunReplay(*records, ro);
  if (!report.ok()) return fail(std::string(report.status().message()));
  report->trace = trace_;
  if (log.is_open()) {
    log << report->Log();
    log.close();
    if (!log) {
      fmt::print(stderr, "myriad loadgen: --log: writing {} failed\n", log_);
      return 1;
    }
  }
  fmt::print("{}", json_ ? report->Json() + "\n" : report->Table());
  std::fflush(stdout);
  return report->ok() > 0 ? 0 : 1;
}

}  // namespace myriad::cli
