#pragma once
// `myriad emu`: an engine emulator that speaks vLLM's OpenAI-compatible HTTP API (completions
// and chat, streaming or not, /v1/models, /health, /tokenize, /detokenize, /metrics with the
// vllm: names) and vLLM's P/D protocol (kv_transfer_params), on top of emu::Engine. Faults on
// command through POST /admin/fault, so a gateway's failure handling can be tested for real.
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/status/status.h"
#include "emu/engine.h"
#include "net/http_server.h"
#include "net/kv_event_publisher.h"
#include "net/openai_request.h"
#include "net/prometheus.h"
#include "tokenizer/prompt_encoder.h"

namespace myriad::emu {

// Text <-> token ids. The default is a stand-in (one id per whitespace-separated word piece);
// give the real model tokenizer where the gateway must see the engine's exact ids.
struct TextCodec {
  std::function<std::vector<uint32_t>(std::string_view text)> encode;
  std::function<std::string(uint32_t id)> decode;
};
TextCodec StandInCodec();

struct EmuOptions {
  net::HttpServerOptions http;
  std::string served_model_name = "emu-model";
  std::string role = "colocated";  // prefill, decode or colocated: what /v1/models reports
  std::string engine_id = "emu-0";  // names this engine in kv_transfer_params
  EngineOptions engine;
  TextCodec codec = StandInCodec();
  // The model's real tokenizer and chat template: prompts become the ids vLLM would compute
  // (and so do the KV events). Null: the stand-in codec and a plain role/content rendering.
  std::shared_ptr<const tokenizer::PromptEncoder> encoder;
  // vLLM's KV-event publisher: PUB endpoint and replay (ROUTER) endpoint, bound; empty: off.
  // "tcp://127.0.0.1:*" binds a free port (see kv_events_endpoint()).
  std::string kv_events;
  std::string kv_replay;
  // vLLM's --data-parallel-size behind one API server: an engine per rank (its own scheduler,
  // prefix cache and KV-event publisher, rank r on the configured ports + r). A request's
  // X-data-parallel-rank header picks the rank; without it the least loaded one serves.
  int dp_ranks = 1;
  int default_max_tokens = 16;
  int max_model_len = 131072;
};

struct Fault {
  // kWrongAnswer: silent corruption: every token is replaced by another, as a bad GPU's
  // answers would be; status, timing and token counts stay right.
  enum class Kind { kNone, kHang, kSlow, kError, kDropStream, kWrongAnswer } kind = Kind::kNone;
  double factor = 1;       // kSlow
  int rank = -1;           // kSlow: only this DP rank's engine (a straggler rank); -1: all
  int status = 500;        // kError
  int after_tokens = 1;    // kDropStream: streams are cut after this many tokens
};

class EmuServer {
 public:
  static absl::StatusOr<std::unique_ptr<EmuServer>> Create(EmuOptions options);
  ~EmuServer();

  absl::Status Start();
  void Stop();
  // Dies as a process would: every connection is cut, nothing more is answered until Stop.
  void Crash();
  void SetFault(Fault fault);
  // Called by POST /admin/fault {"kind":"crash"}; the CLI exits the process here.
  void set_on_crash(std::function<void()> f) { on_crash_ = std::move(f); }

  uint16_t port() const { return http_ ? http_->port() : 0; }
  // The bound KV-event endpoints of a DP rank ("" when off).
  std::string kv_events_endpoint(int rank = 0) const {
    return rank < static_cast<int>(publishers_.size()) ? publishers_[static_cast<size_t>(rank)]->endpoint() : "";
  }
  std::string kv_replay_endpoint(int rank = 0) const {
    return rank < static_cast<int>(publishers_.size()) ? publishers_[static_cast<size_t>(rank)]->replay_endpoint()
                                                       : "";
  }
  Engine& engine(int rank = 0) { return *engines_[static_cast<size_t>(rank)]; }
  int dp_ranks() const { return static_cast<int>(engines_.size()); }
  // Requests answered, by endpoint kind; for tests.
  uint64_t completions() const { return completions_.load(); }

 private:
  struct Live;
  EmuServer(EmuOptions options, std::vector<std::unique_ptr<Engine>> engines);
  absl::Status StartPublishers();
  // The rank a request goes to: its X-data-parallel-rank, else the least loaded; -1 when the
  // header is not a rank of this server.
  int PickRank(const net::HttpRequest& req) const;
  void Handle(net::HttpRequest req, std::shared_ptr<net::HttpResponder> r);
  // `native`: llama-server's own /completion answer instead of OpenAI's.
  void Generate(const net::HttpRequest& req, bool chat, std::shared_ptr<net::HttpResponder> r, bool native = false);
  // The llama-server profile's own endpoints; false when `path` is none of them.
  bool HandleLlama(std::string_view path, const net::HttpRequest& req, std::shared_ptr<net::HttpResponder>& r);
  net::HttpResponse Metrics();
  net::HttpResponse AdminFault(const net::HttpRequest& req);
  std::string Detokenize(const std::vector<uint32_t>& ids) const;
  // The prompt's token ids: as sent, else the text through the model's tokenizer and chat
  // template (without one, the stand-in codec over a plain role/content rendering).
  absl::StatusOr<std::vector<uint32_t>> PromptIds(std::string_view body, const net::GenerateRequest& req) const;
  std::vector<uint32_t> Encode(std::string_view text) const;

  EmuOptions options_;
  std::vector<std::unique_ptr<Engine>> engines_;  // one per DP rank
  std::unique_ptr<net::HttpServer> http_;
  std::vector<std::unique_ptr<net::KvEventPublisher>> publishers_;
  std::function<void()> on_crash_;
  std::atomic<bool> crashed_{false};
  std::atomic<bool> wrong_answers_{false};
  std::atomic<bool> stopped_{false};
  std::atomic<uint64_t> completions_{0};
  std::atomic<uint64_t> next_request_{1};
  mutable std::mutex mu_;
  Fault fault_;
  std::vector<std::shared_ptr<net::HttpResponder>> parked_;  // hung /health and requests
  std::unordered_map<uint64_t, std::shared_ptr<Live>> live_;
  // Latencies per DP rank, as vLLM labels them by engine.
  struct RankLatency {
    net::HistogramCounts ttft, itl, e2e;
  };
  std::vector<RankLatency> latency_;
};

}  // namespace myriad::emu
