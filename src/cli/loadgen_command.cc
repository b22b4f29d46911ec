#include "cli/loadgen_command.h"

#include <fmt/format.h>

#include <cstdio>

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

}  // namespace myriad::cli
