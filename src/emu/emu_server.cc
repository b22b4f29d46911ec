#include "emu/emu_server.h"

#include <algorithm>
#include <charconv>

#include <fmt/format.h>
#define XXH_INLINE_ALL
#include <xxhash.h>

#include <chrono>
#include <random>
#include <nlohmann/json.hpp>

#include "core/block_hash.h"
#include "core/rng.h"
#include "emu/llama_api.h"
#include "emu/store_metrics.h"
#include "net/json_text.h"
#include "net/openai_request.h"

namespace myriad::emu {

namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr const char* kWords[] = {
    " the", " cluster", " routes", " tokens", " to", " a", " replica", " that", " holds",
    " prefix", " cache", " and", " decode", " runs", " on", " GPUs", ".", " KV", " blocks",
    " move", " over", " the", " network", " while", " prefill", " computes", " attention",
    " for", " every", " request", " in", " time"};
constexpr size_t kWordCount = sizeof(kWords) / sizeof(kWords[0]);

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// vLLM's buckets (vllm/v1/metrics/loggers.py), so dashboards' quantiles read alike.
std::vector<double> TtftBuckets() {
  return {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0,
          2.5,   5.0,   7.5,  10,   20,   40,   80,   160, 640, 2560};
}
std::vector<double> InterTokenBuckets() {
  return {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10, 20, 40, 80};
}
std::vector<double> RequestLatencyBuckets() {
  return {0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10, 15, 20, 30, 40, 50, 60, 120, 240, 480, 960, 1920, 7680};
}

int64_t UnixNow() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

net::HttpResponse BadRequest(std::string_view message, std::string_view param = {}) {
  return net::JsonError(400, "invalid_request_error", message, param);  // the parser's vocabulary
}

}  // namespace

TextCodec StandInCodec() {
  TextCodec c;
  c.encode = [](std::string_view text) {
    // One id per word with its leading whitespace, long words cut every 8 bytes: stable ids of
    // roughly the density of a real tokenizer, so block hashes follow the text.
    std::vector<uint32_t> ids;
    size_t i = 0;
    while (i < text.size()) {
      size_t j = i;
      while (j < text.size() && (text[j] == ' ' || text[j] == '\n' || text[j] == '\t')) ++j;
      size_t k = j;
      while (k < text.size() && text[k] != ' ' && text[k] != '\n' && text[k] != '\t' && k - i < 8) ++k;
      if (k == i) k = i + 1;
      ids.push_back(static_cast<uint32_t>(XXH3_64bits(text.data() + i, k - i) % 150000) + 1000);
      i = k;
    }
    return ids;
  };
  c.decode = [](uint32_t id) { return std::string(kWords[id % kWordCount]); };
  return c;
}

// One request in flight: what the engine's callbacks need to answer it.
struct EmuServer::Live {
  uint64_t id = 0;
  uint64_t engine_id = 0;
  int rank = 0;  // the DP rank's engine serving it
  std::shared_ptr<net::HttpResponder> r;
  bool stream = false;
  bool chat = false;
  bool include_usage = false;
  bool remote_decode = false;  // P/D prefill side: answer with kv_transfer_params
  bool native = false;         // llama-server's /completion
  int drop_after = -1;
  std::string text;
  std::vector<uint32_t> prompt;
  Clock::time_point start, first, last;
  std::string rid;
  int64_t created = 0;
};

absl::StatusOr<std::unique_ptr<EmuServer>> EmuServer::Create(EmuOptions options) {
  if (options.dp_ranks < 1 || options.dp_ranks > 1024) {
    return absl::InvalidArgumentError(fmt::format("dp_ranks: {} is not in [1, 1024]", options.dp_ranks));
  }
  if (options.engine.slots && (options.dp_ranks != 1 || !options.kv_events.empty())) {
    return absl::InvalidArgumentError("the llama-server profile has one engine and publishes no KV events");
  }
  std::vector<std::unique_ptr<Engine>> engines;
  for (int rank = 0; rank < options.dp_ranks; ++rank) {
    // Every rank keeps the engine's seed: DP replicas of one model decode a prompt greedily to
    // the same answer, which is what the controller's known-answer probe relies on.
    EngineOptions eo = options.engine;
    // One namespace per served model (a model version), shared by its DP ranks.
    if (eo.kv_store_namespace.empty()) eo.kv_store_namespace = options.served_model_name;
    absl::StatusOr<std::unique_ptr<Engine>> engine = Engine::Create(eo);
    if (!engine.ok()) return engine.status();
    engines.push_back(*std::move(engine));
  }
  // A request longer than the KV cache could never be admitted and would block its engine for
  // good: the context limit is what the cache holds when that is less than max_model_len (vLLM
  // refuses to start then; the emulator serves with the smaller limit, and /v1/models says so).
  const int64_t kv_tokens = engines.front()->stats().kv_blocks * options.engine.block_size;
  options.max_model_len = static_cast<int>(std::min<int64_t>(options.max_model_len, kv_tokens));
  // llama-server refuses what does not fit one slot's context.
  if (options.engine.slots) {
    options.max_model_len = static_cast<int>(std::min<int64_t>(options.max_model_len, options.engine.slots->n_ctx));
  }
  return std::unique_ptr<EmuServer>(new EmuServer(std::move(options), std::move(engines)));
}

EmuServer::EmuServer(EmuOptions options, std::vector<std::unique_ptr<Engine>> engines)
    : options_(std::move(options)), engines_(std::move(engines)) {
  latency_.resize(engines_.size());
  for (RankLatency& h : latency_) {
    h.ttft.bounds = TtftBuckets();
    h.itl.bounds = InterTokenBuckets();
    h.e2e.bounds = RequestLatencyBuckets();
  }
}

EmuServer::~EmuServer() { Stop(); }

namespace {

std::string MediumName(CacheEvent::Medium m) { return m == CacheEvent::Medium::kCpu ? "CPU" : "GPU"; }

// The engine's cache events as vLLM publishes them.
KvEventBatch ToBatch(const std::vector<CacheEvent>& events, int block_size) {
  KvEventBatch b;
  b.ts = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  for (const auto& e : events) {
    switch (e.kind) {
      case CacheEvent::Kind::kStored: {
        BlockStored s;
        s.block_hashes = e.hashes;
        s.parent_block_hash = e.parent;
        s.token_ids = e.tokens;
        s.block_size = static_cast<uint32_t>(block_size);
        s.medium = MediumName(e.medium);
        if (!e.salt.empty()) {
          // vLLM's extra keys: the salt on the request's first block only.
          s.extra_keys.emplace(e.hashes.size());
          (*s.extra_keys)[0] = CacheSaltExtraKeys(e.salt);
        }
        b.events.emplace_back(std::move(s));
        break;
      }
      case CacheEvent::Kind::kRemoved: {
        BlockRemoved r;
        r.block_hashes = e.hashes;
        r.medium = MediumName(e.medium);
        b.events.emplace_back(std::move(r));
        break;
      }
      case CacheEvent::Kind::kCleared:
        b.events.emplace_back(AllBlocksCleared{});
        break;
    }
  }
  return b;
}

}  // namespace

// Rank r publishes on the configured ports + r, as vLLM's DP ranks do. A wildcard port ("*")
// with one rank binds anywhere free. With several, the ports next to one the kernel picks are
// where it places outgoing connections (Linux gives bind and connect ports of opposite
// parity), so under connection churn rank 1 often found its port taken, attempt after attempt;
// the ranks' ports are then drawn below the ephemeral range (32768 up, by default), where only
// explicit binds live, and a taken one makes all start over elsewhere.
namespace {
constexpr int kLowPorts = 20000, kLowPortsEnd = 32000;

std::string WithPort(const std::string& endpoint, int port) {
  const size_t star = endpoint.rfind('*');
  return star == std::string::npos ? endpoint : endpoint.substr(0, star) + std::to_string(port) + endpoint.substr(star + 1);
}
}  // namespace

absl::Status EmuServer::StartPublishers() {
  const int ranks = dp_ranks();
  const bool wildcard = options_.kv_events.find('*') != std::string::npos;
  Rng ports(std::random_device{}());  // which free ports: not part of any result
  const auto pick = [&] { return kLowPorts + static_cast<int>(ports.Below(static_cast<uint64_t>(kLowPortsEnd - kLowPorts - ranks))); };
  absl::Status last;
  for (int attempt = 0; attempt < 50; ++attempt) {
    publishers_.clear();
    std::string events = options_.kv_events, replay = options_.kv_replay;
    if (wildcard && ranks > 1) {
      events = WithPort(events, pick());
      replay = WithPort(replay, pick());
    }
    for (int rank = 0; rank < ranks; ++rank) {
      net::KvEventPublisherOptions po;
      if (rank > 0) {
        // After rank 0 the ports are known: consecutive from what it bound.
        auto e = net::OffsetEndpointPort(publishers_[0]->endpoint(), rank);
        auto r = replay.empty() ? std::optional<std::string>("")
                                : net::OffsetEndpointPort(publishers_[0]->replay_endpoint(), rank);
        if (!e || !r) return absl::InvalidArgumentError(fmt::format("kv_events '{}': no port for DP rank {}", events, rank));
        po.endpoint = *e;
        po.replay_endpoint = *r;
      } else {
        po.endpoint = events;
        po.replay_endpoint = replay;
      }
      auto p = net::KvEventPublisher::Create(po);
      if (!p.ok()) {
        last = p.status();
        break;
      }
      publishers_.push_back(*std::move(p));
    }
    if (static_cast<int>(publishers_.size()) == ranks) break;
    if (!wildcard) return last;  // fixed ports: no retry helps
  }
  if (static_cast<int>(publishers_.size()) != ranks) return last;
  const int bs = options_.engine.block_size;
  for (int rank = 0; rank < ranks; ++rank) {
    net::KvEventPublisher* pub = publishers_[static_cast<size_t>(rank)].get();
    engines_[static_cast<size_t>(rank)]->set_event_sink([pub, bs, rank](std::vector<CacheEvent> events) {
      KvEventBatch batch = ToBatch(events, bs);
      batch.dp_rank = rank;
      (void)pub->Publish(batch);
    });
  }
  return absl::OkStatus();
}

int EmuServer::PickRank(const net::HttpRequest& req) const {
  const int ranks = dp_ranks();
  if (const std::string* h = net::FindHeader(req.headers, "X-data-parallel-rank")) {
    int rank = -1;
    const auto [end, ec] = std::from_chars(h->data(), h->data() + h->size(), rank);
    if (ec != std::errc() || end != h->data() + h->size() || rank < 0 || rank >= ranks) return -1;
    return rank;
  }
  int best = 0;
  int best_load = INT32_MAX;
  for (int rank = 0; rank < ranks; ++rank) {
    const EngineStats s = engines_[static_cast<size_t>(rank)]->stats();
    if (s.running + s.waiting < best_load) best_load = s.running + s.waiting, best = rank;
  }
  return best;
}

absl::Status EmuServer::Start() {
  if (!options_.kv_events.empty()) {
    if (absl::Status st = StartPublishers(); !st.ok()) return st;
  }
  if (options_.http.stop_grace > kSecond) options_.http.stop_grace = 200 * kMillisecond;
  http_ = std::make_unique<net::HttpServer>(
      options_.http, [this](net::HttpRequest req, std::shared_ptr<net::HttpResponder> r) {
        Handle(std::move(req), std::move(r));
      });
  return http_->Start();
}

void EmuServer::Stop() {
  if (stopped_.exchange(true)) return;
  Crash();  // cut every open request: nothing is answered once stopping
  if (http_) http_->Stop();
  engines_.clear();  // the engines' last callbacks only drop their responders now
  for (auto& p : publishers_) p->Stop();
  std::lock_guard l(mu_);
  live_.clear();
}

void EmuServer::Crash() {
  crashed_ = true;
  std::vector<std::shared_ptr<net::HttpResponder>> all;
  {
    std::lock_guard l(mu_);
    for (auto& [id, live] : live_) all.push_back(live->r);
    for (auto& r : parked_) all.push_back(r);
    parked_.clear();
  }
  for (auto& r : all) r->Abort();
  for (auto& e : engines_) e->SetHung(true);
}


void EmuServer::SetFault(Fault fault) {
  std::lock_guard l(mu_);
  fault_ = fault;
  wrong_answers_ = fault.kind == Fault::Kind::kWrongAnswer;
  for (size_t i = 0; i < engines_.size(); ++i) {
    const bool slowed = fault.kind == Fault::Kind::kSlow && (fault.rank < 0 || static_cast<size_t>(fault.rank) == i);
    engines_[i]->SetSlowdown(slowed ? fault.factor : 1.0);
    engines_[i]->SetHung(fault.kind == Fault::Kind::kHang);
  }
  if (fault.kind != Fault::Kind::kHang) {
    // Unhung: the parked health checks are answered now.
    for (auto& r : parked_) r->Respond(net::HttpResponse{200, "text/plain", "", {}});
    parked_.clear();
  }
}

void EmuServer::Handle(net::HttpRequest req, std::shared_ptr<net::HttpResponder> r) {
  if (crashed_) return r->Abort();
  const std::string_view path = req.path();
  Fault fault;
  {
    std::lock_guard l(mu_);
    fault = fault_;
  }
  if (path == "/admin/fault") return r->Respond(AdminFault(req));
  // Hung as vLLM's engine core hangs: the API server still takes requests (they wait in the
  // engine, counted in /metrics, where a controller sees no progress) but health checks that ask
  // the engine get no answer.
  if (fault.kind == Fault::Kind::kHang && (path == "/health" || path == "/ping")) {
    std::lock_guard l(mu_);
    parked_.push_back(std::move(r));
    return;
  }
  if (options_.engine.slots && HandleLlama(path, req, r)) return;
  if (path == "/health" || path == "/ping") {
    return r->Respond(net::HttpResponse{200, "text/plain", "", {}});
  }
  if (path == "/metrics") return r->Respond(Metrics());
  if (path == "/v1/models") {
    json models = {{"object", "list"},
                   {"data",
                    json::array({{{"id", options_.served_model_name},
                                  {"object", "model"},
                                  {"created", UnixNow()},
                                  {"owned_by", "myriad-emu"},
                                  {"root", options_.served_model_name},
                                  {"max_model_len", options_.max_model_len}}})}};
    return r->Respond(net::HttpResponse{200, "application/json", net::JsonText(models), {}});
  }
  if (path == "/tokenize" || path == "/detokenize") {
    json body = json::parse(req.body, nullptr, false);
    if (body.is_discarded() || !body.is_object()) return r->Respond(BadRequest("body is not a JSON object"));
    if (path == "/tokenize") {
      if (!body.contains("prompt") || !body["prompt"].is_string()) {
        return r->Respond(BadRequest("'prompt' must be a string", "prompt"));
      }
      auto ids = Encode(body["prompt"].get<std::string>());
      json out = {{"count", ids.size()}, {"max_model_len", options_.max_model_len}, {"tokens", ids}};
      return r->Respond(net::HttpResponse{200, "application/json", net::JsonText(out), {}});
    }
    if (!body.contains("tokens") || !body["tokens"].is_array()) {
      return r->Respond(BadRequest("'tokens' must be an array of ids", "tokens"));
    }
    std::vector<uint32_t> ids;
    for (const auto& t : body["tokens"]) {
      if (!t.is_number_unsigned()) return r->Respond(BadRequest("'tokens' must be ids", "tokens"));
      ids.push_back(t.get<uint32_t>());
    }
    json out = {{"prompt", Detokenize(ids)}};
    return r->Respond(net::HttpResponse{200, "application/json", net::JsonText(out), {}});
  }
  const bool completions = path == "/v1/completions";
  const bool chat = path == "/v1/chat/completions";
  if (completions || chat) {
    if (req.method != "POST") return r->Respond(net::JsonError(405, "MethodNotAllowed", "use POST"));
    if (fault.kind == Fault::Kind::kError) {
      return r->Respond(net::JsonError(fault.status, "InternalServerError", "injected fault"));
    }
    return Generate(req, chat, std::move(r));
  }
  r->Respond(net::JsonError(404, "NotFoundError", fmt::format("no route for {}", std::string(path))));
}

bool EmuServer::HandleLlama(std::string_view path, const net::HttpRequest& req,
                            std::shared_ptr<net::HttpResponder>& r) {
  const SlotProfile& p = *options_.engine.slots;
  if (path == "/completion" || path == "/completions") {
    absl::StatusOr<std::string> body = llama::NativeToOpenAi(req.body);
    if (req.method != "POST") {
      r->Respond(net::JsonError(405, "MethodNotAllowed", "use POST"));
    } else if (!body.ok()) {
      r->Respond(BadRequest(std::string(body.status().message())));
    } else {
      net::HttpRequest openai = req;
      openai.body = *std::move(body);
      Generate(openai, /*chat=*/false, std::move(r), /*native=*/true);
    }
    return true;
  }
  if (path != "/health" && path != "/props" && path != "/slots" && path != "/metrics") return false;
  const EngineStats s = engines_.front()->stats();
  if (path == "/metrics") {
    r->Respond(net::HttpResponse{200, std::string(net::kPrometheusContentType), llama::Metrics(s), {}});
    return true;
  }
  const json body = path == "/health"  ? json{{"status", "ok"}}
                    : path == "/props" ? llama::Props(options_.served_model_name, p, options_.default_max_tokens)
                                       : llama::Slots(s, p);
  r->Respond(net::HttpResponse{200, "application/json; charset=utf-8", net::JsonText(body), {}});
  return true;
}

std::vector<uint32_t> EmuServer::Encode(std::string_view text) const {
  return options_.encoder ? options_.encoder->Completion(text) : options_.codec.encode(text);
}

std::string EmuServer::Detokenize(const std::vector<uint32_t>& ids) const {
  std::string out;
  for (uint32_t id : ids) out += options_.codec.decode(id);
  return out;
}

absl::StatusOr<std::vector<uint32_t>> EmuServer::PromptIds(std::string_view body,
                                                          const net::GenerateRequest& req) const {
  if (!req.chat) return req.token_ids.empty() ? Encode(req.text) : req.token_ids;
  if (options_.encoder) return options_.encoder->Chat(body);
  std::string text;
  for (const net::ChatMessage& m : req.messages) text += "<|" + m.role + "|>\n" + m.content + "\n";
  text += "<|assistant|>\n";
  return options_.codec.encode(text);
}

void EmuServer::Generate(const net::HttpRequest& req, bool chat, std::shared_ptr<net::HttpResponder> r,
                         bool native) {
  // The gateway's own parser: a body is refused here exactly as the gateway refuses it. As
  // vLLM, a request naming no model gets the served one; one choice per request.
  net::GenerateRequest parsed;
  net::RequestError error;
  const net::ParseOptions po{.require_model = false, .default_max_tokens = options_.default_max_tokens, .max_n = 1};
  if (!net::ParseGenerateRequest(req.body, chat, &parsed, &error, po)) return r->Respond(error.Response());
  if (!parsed.model.empty() && parsed.model != options_.served_model_name) {
    return r->Respond(net::JsonError(404, "NotFoundError", fmt::format("The model `{}` does not exist.", parsed.model),
                                     "model"));
  }
  // llama-server has no P/D: its KV never leaves the slot, so a transfer cannot be honoured.
  if (options_.engine.slots && (parsed.remote_decode || parsed.remote_prefill)) {
    return r->Respond(BadRequest("kv_transfer_params: the llama-server profile has no P/D", "kv_transfer_params"));
  }
  auto live = std::make_shared<Live>();
  live->chat = chat;
  live->native = native;
  live->rank = PickRank(req);
  if (live->rank < 0) {
    return r->Respond(BadRequest(fmt::format("X-data-parallel-rank must be a rank in [0, {})", dp_ranks()),
                                 "X-data-parallel-rank"));
  }
  absl::StatusOr<std::vector<uint32_t>> prompt = PromptIds(req.body, parsed);
  if (!prompt.ok()) return r->Respond(BadRequest(std::string(prompt.status().message()), "messages"));
  if (prompt->empty()) return r->Respond(BadRequest("the prompt is empty", chat ? "messages" : "prompt"));
  live->prompt = *std::move(prompt);
  const int64_t max_tokens = parsed.max_tokens;
  if (static_cast<int64_t>(live->prompt.size()) + max_tokens > options_.max_model_len) {
    return r->Respond(BadRequest(
        fmt::format("This model's maximum context length is {} tokens. However, you requested {} "
                    "tokens ({} in the messages, {} in the completion).",
                    options_.max_model_len, static_cast<int64_t>(live->prompt.size()) + max_tokens,
                    live->prompt.size(), max_tokens)));
  }
  live->stream = parsed.stream;
  live->include_usage = parsed.include_usage;
  live->remote_decode = parsed.remote_decode;
  GenRequest g;
  g.cache_salt = parsed.cache_salt;
  g.remote_prefill = parsed.remote_prefill;
  {
    std::lock_guard l(mu_);
    if (fault_.kind == Fault::Kind::kDropStream) live->drop_after = fault_.after_tokens;
  }
  live->id = next_request_.fetch_add(1);
  live->rid = fmt::format("{}-{:016x}", chat ? "chatcmpl" : "cmpl", Mix64(live->id));
  live->created = UnixNow();
  live->start = Clock::now();
  live->r = r;
  g.prompt = live->prompt;
  g.max_tokens = static_cast<int>(max_tokens);  // within max_model_len, an int
  const std::string model = options_.served_model_name;
  auto chunk_json = [model, live](std::string_view text, const char* finish, const json* timings = nullptr) {
    json c;
    c["id"] = live->rid;
    c["object"] = live->chat ? "chat.completion.chunk" : "text_completion";
    c["created"] = live->created;
    c["model"] = model;
    json choice = {{"index", 0}, {"logprobs", nullptr},
                   {"finish_reason", finish ? json(finish) : json(nullptr)}};
    if (live->chat) {
      choice["delta"] = json::object();
      if (!text.empty() || !finish) choice["delta"]["content"] = text;
    } else {
      choice["text"] = text;
      choice["stop_reason"] = nullptr;
    }
    c["choices"] = json::array({choice});
    if (timings) c["timings"] = *timings;
    return "data: " + net::JsonText(c) + "\n\n";
  };
  g.on_token = [this, live, chunk_json](int index, uint32_t token) {
    const auto now = Clock::now();
    const std::string piece = options_.codec.decode(wrong_answers_ ? token ^ 1u : token);
    {
      std::lock_guard l(mu_);
      RankLatency& h = latency_[static_cast<size_t>(live->rank)];
      if (index == 0) {
        live->first = now;
        h.ttft.Observe(Seconds(now - live->start));
      } else {
        h.itl.Observe(Seconds(now - live->last));
      }
    }
    live->last = now;
    live->text += piece;
    if (!live->stream) return;
    if (live->drop_after >= 0 && index >= live->drop_after) {
      live->r->Abort();  // the stream is cut mid-way, as a dying engine would
      if (!engines_.empty()) engines_[static_cast<size_t>(live->rank)]->Cancel(live->engine_id);
      return;
    }
    if (live->native) {
      live->r->Write("data: " + net::JsonText(llama::NativePartial(piece, index, static_cast<int64_t>(live->prompt.size()))) +
                     "\n\n");
      return;
    }
    if (index == 0 && live->chat) {
      json c = {{"id", live->rid}, {"object", "chat.completion.chunk"}, {"created", live->created},
                {"model", options_.served_model_name},
                {"choices", json::array({{{"index", 0},
                                          {"delta", {{"role", "assistant"}, {"content", ""}}},
                                          {"logprobs", nullptr},
                                          {"finish_reason", nullptr}}})}};
      live->r->Write("data: " + net::JsonText(c) + "\n\n");
    }
    live->r->Write(chunk_json(piece, nullptr));
  };
  g.on_finish = [this, live, chunk_json](std::string_view reason, const Usage& u) {
    const auto now = Clock::now();
    {
      std::lock_guard l(mu_);
      live_.erase(live->id);
      if (reason == "length") latency_[static_cast<size_t>(live->rank)].e2e.Observe(Seconds(now - live->start));
    }
    completions_++;
    json usage = {{"prompt_tokens", u.prompt_tokens},
                  {"completion_tokens", u.completion_tokens},
                  {"total_tokens", u.prompt_tokens + u.completion_tokens},
                  {"prompt_tokens_details", {{"cached_tokens", u.cached_tokens}}}};
    if (reason == "abort") {
      if (live->stream) {
        live->r->Abort();
      } else {
        live->r->Respond(net::JsonError(500, "InternalServerError", "the request was aborted"));
      }
      return;
    }
    // llama-server's timings on the last answer (its llama-server profile only).
    const json timings = options_.engine.slots ? llama::Timings(u) : json();
    if (live->native) {
      const json out = llama::NativeFinal(options_.served_model_name, live->text, u, live->stream);
      if (!live->stream) return live->r->Respond(net::HttpResponse{200, "application/json", net::JsonText(out), {}});
      live->r->Write("data: " + net::JsonText(out) + "\n\n");
      live->r->End();
      return;
    }
    if (live->stream) {
      live->r->Write(chunk_json("", std::string(reason).c_str(), timings.is_null() ? nullptr : &timings));
      if (live->include_usage) {
        json c = {{"id", live->rid},
                  {"object", live->chat ? "chat.completion.chunk" : "text_completion"},
                  {"created", live->created}, {"model", options_.served_model_name},
                  {"choices", json::array()}, {"usage", usage}};
        live->r->Write("data: " + net::JsonText(c) + "\n\n");
      }
      live->r->Write("data: [DONE]\n\n");
      live->r->End();
      return;
    }
    json out = {{"id", live->rid},
                {"object", live->chat ? "chat.completion" : "text_completion"},
                {"created", live->created},
                {"model", options_.served_model_name},
                {"usage", usage}};
    json choice = {{"index", 0}, {"logprobs", nullptr}, {"finish_reason", reason}};
    if (live->chat) {
      choice["message"] = {{"role", "assistant"}, {"content", live->text}};
    } else {
      choice["text"] = live->text;
      choice["stop_reason"] = nullptr;
    }
    out["choices"] = json::array({choice});
    if (!timings.is_null()) out["timings"] = timings;
    if (live->remote_decode) {
      // vLLM's prefill side of P/D: where the decode engine pulls the prompt's KV from.
      const int64_t bs = options_.engine.block_size;
      json blocks = json::array();
      for (int64_t b = 0; b < (static_cast<int64_t>(live->prompt.size()) + bs - 1) / bs; ++b) {
        blocks.push_back(b);
      }
      out["kv_transfer_params"] = {{"do_remote_prefill", true},
                                   {"do_remote_decode", false},
                                   {"remote_engine_id", options_.engine_id},
                                   {"remote_block_ids", blocks},
                                   {"remote_host", options_.http.address},
                                   {"remote_port", port()},
                                   {"tp_size", options_.engine.layout.tp}};
    } else {
      out["kv_transfer_params"] = nullptr;
    }
    live->r->Respond(net::HttpResponse{200, "application/json", net::JsonText(out), {}});
  };
  if (live->stream) {
    r->BeginStream(200, "text/event-stream", {{"Cache-Control", "no-cache"}});
  }
  {
    std::lock_guard l(mu_);
    live_[live->id] = live;
  }
  live->engine_id = engines_[static_cast<size_t>(live->rank)]->Submit(std::move(g));
  // A client that leaves aborts its request, as vLLM does. Weak: the request holds its
  // responder, so a strong capture here would be a cycle through the connection.
  std::weak_ptr<Live> weak = live;
  r->OnClientGone([this, weak] {
    const std::shared_ptr<Live> l = weak.lock();
    if (l && !engines_.empty()) engines_[static_cast<size_t>(l->rank)]->Cancel(l->engine_id);
  });
}

net::HttpResponse EmuServer::Metrics() {
  // vLLM's names, types, help and labels (vllm/v1/metrics/loggers.py): one label set per DP
  // rank (model_name, engine="<rank>"), as vLLM's API server reports its engines. Counters are
  // named with _total in their HELP and TYPE lines, as prometheus_client writes them.
  std::vector<EngineStats> stats;
  for (const auto& e : engines_) stats.push_back(e->stats());
  net::PrometheusWriter w;
  const std::string& m = options_.served_model_name;
  std::vector<std::string> engine_ids;
  for (size_t i = 0; i < stats.size(); ++i) engine_ids.push_back(std::to_string(i));
  auto family = [&](std::string_view name, std::string_view help, net::MetricType type, auto value) {
    w.Family(name, help, type);
    for (size_t i = 0; i < stats.size(); ++i) w.Sample(name, {{"model_name", m}, {"engine", engine_ids[i]}}, value(stats[i]));
  };
  using net::MetricType;
  family("vllm:num_requests_running", "Number of requests in model execution batches.", MetricType::kGauge,
         [](const EngineStats& s) { return static_cast<int64_t>(s.running); });
  family("vllm:num_requests_waiting", "Number of requests waiting to be processed.", MetricType::kGauge,
         [](const EngineStats& s) { return static_cast<int64_t>(s.waiting); });
  family("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", MetricType::kGauge,
         [](const EngineStats& s) { return s.kv_usage; });
  // vLLM's name before 0.9, still served by it (and read by older routers).
  family("vllm:gpu_cache_usage_perc",
         "GPU KV-cache usage. 1 means 100 percent usage. DEPRECATED: Use vllm:kv_cache_usage_perc instead.",
         MetricType::kGauge, [](const EngineStats& s) { return s.kv_usage; });
  family("vllm:prefix_cache_queries_total", "Prefix cache queries, in terms of number of queried tokens.",
         MetricType::kCounter, [](const EngineStats& s) { return s.prefix_queries; });
  family("vllm:prefix_cache_hits_total", "Prefix cache hits, in terms of number of cached tokens.",
         MetricType::kCounter, [](const EngineStats& s) { return s.prefix_hits; });
  if (!stats.empty() && stats.front().store_enabled) WriteStoreMetrics(w, m, stats);
  family("vllm:num_preemptions_total", "Cumulative number of preemption from the engine.", MetricType::kCounter,
         [](const EngineStats& s) { return s.preemptions; });
  family("vllm:prompt_tokens_total", "Number of prefill tokens processed.", MetricType::kCounter,
         [](const EngineStats& s) { return s.prompt_tokens; });
  family("vllm:generation_tokens_total", "Number of generation tokens processed.", MetricType::kCounter,
         [](const EngineStats& s) { return s.generation_tokens; });
  // Every reason vLLM has, zeros included, as it pre-creates them; the emulator never stops on
  // a stop string, so "stop" stays 0.
  w.Family("vllm:request_success_total", "Count of successfully processed requests.", MetricType::kCounter);
  for (size_t i = 0; i < stats.size(); ++i) {
    const std::pair<std::string_view, uint64_t> reasons[] = {
        {"stop", 0}, {"length", stats[i].finished_length}, {"abort", stats[i].finished_abort}};
    for (const auto& [reason, n] : reasons) {
      w.Sample("vllm:request_success_total", {{"model_name", m}, {"engine", engine_ids[i]}, {"finished_reason", reason}},
               n);
    }
  }
  net::HistogramCounts iteration;
  iteration.bounds.assign(EngineStats::kIterationTokenBounds.begin(), EngineStats::kIterationTokenBounds.end());
  for (size_t i = 0; i < stats.size(); ++i) {
    iteration.counts.assign(stats[i].iteration_tokens.begin(), stats[i].iteration_tokens.end());
    iteration.sum = static_cast<double>(stats[i].iteration_tokens_sum);
    // vLLM's name: a histogram that ends in _total (promtool says so; the tests waive it).
    w.Histogram("vllm:iteration_tokens_total", "Histogram of number of tokens per engine_step.",
                {{"model_name", m}, {"engine", engine_ids[i]}}, iteration, /*family=*/i == 0);
  }
  const std::string bs = std::to_string(options_.engine.block_size);
  w.Family("vllm:cache_config_info", "Information of the LLMEngine CacheConfig", MetricType::kGauge);
  for (size_t i = 0; i < stats.size(); ++i) {
    w.Sample("vllm:cache_config_info",
             {{"block_size", bs}, {"num_gpu_blocks", std::to_string(stats[i].kv_blocks)}, {"engine", engine_ids[i]}}, 1.0);
  }
  {
    std::lock_guard l(mu_);
    auto histogram = [&](std::string_view name, std::string_view help, net::HistogramCounts RankLatency::*h) {
      for (size_t i = 0; i < latency_.size(); ++i) {
        w.Histogram(name, help, {{"model_name", m}, {"engine", engine_ids[i]}}, latency_[i].*h, i == 0);
      }
    };
    histogram("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", &RankLatency::ttft);
    histogram("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", &RankLatency::itl);
    // vLLM's name for the same observations before 0.11 (still served, deprecated).
    histogram("vllm:time_per_output_token_seconds",
              "Histogram of time per output token in seconds. DEPRECATED: Use vllm:inter_token_latency_seconds instead.",
              &RankLatency::itl);
    histogram("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", &RankLatency::e2e);
  }
  return net::HttpResponse{200, std::string(net::kPrometheusContentType), w.Take(), {}};
}

net::HttpResponse EmuServer::AdminFault(const net::HttpRequest& req) {
  if (req.method == "GET") {
    std::lock_guard l(mu_);
    return net::HttpResponse{200, "application/json",
                             net::JsonText(json({{"kind", static_cast<int>(fault_.kind)}})), {}};
  }
  json body = json::parse(req.body, nullptr, false);
  if (body.is_discarded() || !body.is_object() || !body.contains("kind") || !body["kind"].is_string()) {
    return BadRequest("expected {\"kind\": \"none|hang|slow|error|drop_stream|wrong_answer|crash\", ...}", "kind");
  }
  const std::string kind = body["kind"].get<std::string>();
  for (const char* field : {"factor", "status", "after_tokens", "rank"}) {
    if (body.contains(field) && !body[field].is_number()) return BadRequest(fmt::format("'{}' must be a number", field), field);
  }
  Fault f;
  if (kind == "none") {
    f.kind = Fault::Kind::kNone;
  } else if (kind == "hang") {
    f.kind = Fault::Kind::kHang;
  } else if (kind == "slow") {
    f.kind = Fault::Kind::kSlow;
    f.factor = body.value("factor", 4.0);
    if (!(f.factor > 0) || f.factor > 1000) return BadRequest("'factor' must be in (0, 1000]", "factor");
    if (body.contains("rank")) {
      if (!body["rank"].is_number_integer() || body["rank"].get<int64_t>() < 0 ||
          body["rank"].get<int64_t>() >= static_cast<int64_t>(engines_.size())) {
        return BadRequest(fmt::format("'rank' must be a DP rank of this engine, 0..{}", engines_.size() - 1), "rank");
      }
      f.rank = body["rank"].get<int>();
    }
  } else if (kind == "error") {
    f.kind = Fault::Kind::kError;
    f.status = body.value("status", 500);
    if (f.status < 400 || f.status > 599) return BadRequest("'status' must be 4xx or 5xx", "status");
  } else if (kind == "drop_stream") {
    f.kind = Fault::Kind::kDropStream;
    f.after_tokens = body.value("after_tokens", 1);
  } else if (kind == "wrong_answer") {
    f.kind = Fault::Kind::kWrongAnswer;
  } else if (kind == "crash") {
    if (on_crash_) on_crash_();
    Crash();
    return net::HttpResponse{200, "application/json", "{}", {}};
  } else {
    return BadRequest(fmt::format("unknown fault kind '{}'", kind), "kind");
  }
  SetFault(f);
  return net::HttpResponse{200, "application/json", net::JsonText(json({{"kind", kind}})), {}};
}

}  // namespace myriad::emu
