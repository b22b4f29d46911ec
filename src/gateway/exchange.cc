#include "gateway/exchange.h"

#include <fmt/format.h>

#include <charconv>
#include <utility>

#include <nlohmann/json.hpp>

#include "core/rng.h"
#include "core/time.h"
#include "net/json_text.h"

namespace myriad::gateway {

using json = nlohmann::json;

namespace {

bool IsHex(std::string_view s) {
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

std::string Hex64(uint64_t v) { return fmt::format("{:016x}", v); }

double Ms(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

// The status a failed upstream call is reported to the client as.
int StatusFor(const absl::Status& st) {
  return st.code() == absl::StatusCode::kDeadlineExceeded ? 504 : 502;
}

}  // namespace

TraceContext TraceContext::FromHeader(const std::string* header, uint64_t entropy) {
  TraceContext t;
  if (header && header->size() == 55) {
    const std::string& h = *header;
    const std::string_view version(h.data(), 2), trace(h.data() + 3, 32), span(h.data() + 36, 16),
        flags(h.data() + 53, 2);
    if (h[2] == '-' && h[35] == '-' && h[52] == '-' && IsHex(version) && version != "ff" &&
        IsHex(trace) && IsHex(span) && IsHex(flags) &&
        trace != std::string(32, '0') && span != std::string(16, '0')) {
      t.trace_id = std::string(trace);
      t.flags = std::string(flags);
      std::from_chars(span.data(), span.data() + span.size(), t.parent_span, 16);
      return t;
    }
  }
  t.trace_id = Hex64(Mix64(entropy)) + Hex64(Mix64(entropy ^ 0x9e3779b97f4a7c15ULL));
  return t;
}

std::string TraceContext::Header(uint64_t span_entropy) const {
  uint64_t span = Mix64(span_entropy);
  return HeaderWithSpan(span == 0 ? 1 : span);
}

std::string TraceContext::HeaderWithSpan(uint64_t span_id) const {
  return fmt::format("00-{}-{}-{}", trace_id, Hex64(span_id), flags);
}

void Exchange::Dispatch() {
  std::lock_guard l(mu);
  if (cancelled || finished) return;
  if (gw->shutting_down()) {
    return FinishWithError(503, "service_unavailable", "the gateway is shutting down");
  }
  const auto route_begin = Clock::now();
  Route route = gw->Pick(*this);
  if (spans) spans->Routing(route_begin, Clock::now(), route, input_tokens);
  if (route.rejected) {
    gw->CountRejected();
    decision = route.reason;
    if (tried.empty()) reject_reason = route.reason;
    if (route.no_backend) {
      const std::string msg =
          last_error.empty()
              ? fmt::format("no available backend serves model '{}'", req.model)
              : fmt::format("no backend left to try for model '{}' (last error: {})", req.model,
                            last_error);
      if (Retryable(upstream_status) && !held.empty() && tried.size() > 0) {
        // Every backend answered with an error: pass the last one on as it was.
        status_sent = upstream_status;
        r->Respond(net::HttpResponse{upstream_status, "application/json", held, {}});
        return Finish(upstream_status);
      }
      return FinishWithError(tried.empty() ? 503 : StatusFor(absl::UnavailableError("")),
                             "service_unavailable", msg);
    }
    net::HttpResponse resp = net::JsonError(
        429, "rate_limit_exceeded",
        fmt::format("rejected: {} (tenant '{}', estimated time to first token {:.2f} s)", route.reason,
                    tenant_name, route.estimated_ttft_s));
    resp.headers.emplace_back("Retry-After", "1");
    status_sent = 429;
    r->Respond(std::move(resp));
    return Finish(429);
  }
  cached_tokens = route.cached_tokens;
  decision = route.reason;
  queued = std::max<int64_t>(0, input_tokens - route.cached_tokens);
  cost_sample = route.cost_sample;
  first_byte = false;
  upstream_status = 0;
  held.clear();
  attempts++;
  meter = StreamMeter(req.stream);  // a retry starts before any token: nothing of the last call counts
  rank = route.entry_rank;
  decode_rank = route.decode_rank;
  if (route.decode && route.entry->config.role == BackendRole::kPrefill) {
    pd = true;
    decode_backend = route.decode;
    json body = req.body;
    body["stream"] = false;
    body["max_tokens"] = 1;
    if (body.contains("max_completion_tokens")) body["max_completion_tokens"] = 1;
    body.erase("stream_options");
    body["kv_transfer_params"] = {{"do_remote_decode", true}, {"do_remote_prefill", false},
                                  {"remote_engine_id", nullptr}, {"remote_block_ids", nullptr},
                                  {"remote_host", nullptr}, {"remote_port", nullptr}};
    return StartCall(route.entry, net::JsonText(body), true);
  }
  pd = false;
  decode_backend = nullptr;
  StartCall(route.entry, raw_body, false);
}

void Exchange::StartCall(std::shared_ptr<Backend> b, std::string body, bool prefill_phase) {
  if (gw->shutting_down()) {
    // Give back the load Pick or AfterPrefill charged.
    gw->Finished({b, rank}, true, queued, std::exchange(decode_kv, 0));
    return FinishWithError(503, "service_unavailable", "the gateway is shutting down");
  }
  backend = b;
  tried.push_back(b->config.name);
  // The decode half of a P/D request starts from transferred KV: its first token says nothing
  // of a prefill.
  cost_pending = b->cost_model != nullptr && (prefill_phase || (!pd && (req.stream || req.max_tokens <= 1)));
  first_token = false;
  call_failure.clear();
  call_timed_out = false;
  call_start = Clock::now();
  net::CallRequest c;
  c.server = b->address;
  c.method = "POST";
  c.target = req.chat ? "/v1/chat/completions" : "/v1/completions";
  c.body = std::move(body);
  // With tracing, the engine's parent is this attempt's span, so its own spans nest under it.
  c.headers.emplace_back(
      "traceparent",
      spans ? trace.HeaderWithSpan(spans->BeginAttempt(call_start, b->config.name, b->address, c.target, attempts - 1,
                                                       prefill_phase ? "prefill" : pd ? "decode" : "full", rank))
            : trace.Header(reinterpret_cast<uintptr_t>(this) ^ static_cast<uint64_t>(attempts) ^
                           (prefill_phase ? 0x5a5a : 0)));
  c.headers.emplace_back("X-Request-Id", trace.trace_id);
  // The DP rank whose KV cache the router counted on (vLLM and SGLang honour it).
  if (rank >= 0) c.headers.emplace_back("X-data-parallel-rank", std::to_string(rank));
  c.timeouts.connect = gw->config().connect_timeout;
  c.timeouts.first_byte = gw->config().first_byte_timeout;
  c.timeouts.idle = gw->config().idle_timeout;
  auto self = shared_from_this();
  net::CallCallbacks cb;
  cb.on_header = [self, prefill_phase](int status, const net::Headers& h) {
    self->OnHeader(status, h, prefill_phase);
  };
  cb.on_data = [self, prefill_phase](std::string_view d) { self->OnData(d, prefill_phase); };
  cb.on_done = [self, prefill_phase](absl::Status st, net::CallStage stage) {
    self->OnDone(std::move(st), stage, prefill_phase);
  };
  call = gw->StartUpstream(std::move(c), std::move(cb));
}

void Exchange::OnHeader(int status, const net::Headers& headers, bool prefill_phase) {
  std::lock_guard l(mu);
  if (finished) return;
  upstream_status = status;
  if (status != 200) cost_pending = false;
  if (!first_byte) {
    first_byte = true;
    first = Clock::now();
  }
  content_type = "application/json";
  if (const std::string* ct = net::FindHeader(headers, "Content-Type")) content_type = *ct;
  // Held back: errors that may be retried elsewhere, the prefill answer (consumed here), and a
  // 200 until its first token (engines such as llama.cpp send it before they prefill, and may
  // still fail before a token: that is retried too).
  if (prefill_phase || Retryable(status) || status == 200) return;
  r->BeginStream(status, content_type, ClientHeaders());
  header_sent = true;
  status_sent = status;
}

net::Headers Exchange::ClientHeaders() const {
  net::Headers out;
  out.emplace_back("traceparent", spans ? trace.HeaderWithSpan(spans->root_span_id())
                                        : trace.Header(static_cast<uint64_t>(start.time_since_epoch().count())));
  out.emplace_back("X-Myriad-Backend", backend->config.name);
  if (!prefill_backend.empty()) out.emplace_back("X-Myriad-Prefill-Backend", prefill_backend);
  if (prefill_cached >= 0) out.emplace_back("X-Myriad-Prefill-Cached-Tokens", std::to_string(prefill_cached));
  if (rank >= 0) out.emplace_back("X-Myriad-Dp-Rank", std::to_string(rank));
  return out;
}

void Exchange::BeginClientStream() {
  r->BeginStream(200, content_type, ClientHeaders());
  header_sent = true;
  status_sent = 200;
  std::string out = std::move(held);
  held.clear();
  if (!out.empty()) Relay(out);
}

void Exchange::Relay(std::string_view data) {
  if (cancelled) return;
  if (r->buffered_bytes() + data.size() > gw->config().max_client_backlog_bytes) {
    // The client does not keep up: drop it rather than buffer without bound.
    gw->CountSlowClient();
    last_error = fmt::format("client backlog over {} bytes", gw->config().max_client_backlog_bytes);
    cancelled = true;
    r->Abort();
    if (call) call->Cancel();
    return;
  }
  bytes_out += data.size();
  r->Write(data);
  // Whatever the client does next, it has had the whole answer.
  if (meter.ended()) end_relayed = true;
}

void Exchange::OnData(std::string_view data, bool prefill_phase) {
  std::lock_guard l(mu);
  if (finished || !call_failure.empty()) return;
  if (upstream_status != 200 || prefill_phase) {
    // An error body, or the prefill phase's answer (its end is its first token, in OnDone).
    if (header_sent) return Relay(data);
    if (held.size() < kMaxHeldBytes) held.append(data);
    return;
  }
  const auto now = Clock::now();
  meter.OnData(data, now);
  if (!first_token && meter.has_first_token()) OnFirstToken(/*observe=*/true);
  if (header_sent) return Relay(data);
  if (req.stream && !first_token) {
    if (meter.error_before_token()) {
      held.append(data);
      return FailCall(
          fmt::format("{} sent an error event before its first token: {}", backend->config.name, held.substr(0, 512)),
          false);
    }
    // The hold is bounded by first_byte_timeout from the call's start (a silent upstream by
    // idle_timeout, in the client below us).
    if (now - call_start > std::chrono::nanoseconds(gw->config().first_byte_timeout)) {
      return FailCall(fmt::format("{} sent no token within first_byte_timeout ({} ms)", backend->config.name,
                                  gw->config().first_byte_timeout / kMillisecond),
                      true);
    }
  }
  held.append(data);
  // A whole answer is held to its end (OnDone), unless it is too large to hold.
  if (first_token || held.size() > kMaxHeldBytes) BeginClientStream();
}

void Exchange::FailCall(std::string why, bool timed_out) {
  call_failure = std::move(why);
  call_timed_out = timed_out;
  held.clear();
  if (call) call->Cancel();
}

void Exchange::OnDone(absl::Status st, net::CallStage stage, bool prefill_phase) {
  std::unique_lock l(mu);
  if (finished) return;
  if (spans) {
    spans->EndAttempt(Clock::now(), upstream_status,
                      !call_failure.empty() ? std::string_view(call_failure)
                      : cancelled           ? std::string_view("the client left")
                                            : std::string_view(st.message().data(), st.message().size()),
                      meter.has_first_token() ? std::chrono::duration<double>(meter.first_token() - call_start).count()
                                              : -1.0);
  }
  std::shared_ptr<Backend> b = backend;
  if (cancelled) {
    // A stream whose end the client was sent is a success, even when the client closes before
    // the upstream's last bytes: it read the whole answer.
    gw->Finished({b, rank}, true, queued, std::exchange(decode_kv, 0));
    if (end_relayed) return Finish(status_sent);
    status_sent = 499;  // nginx's "client closed request"
    return Finish(499);
  }
  if (!call_failure.empty()) {
    st = call_timed_out ? absl::DeadlineExceededError(call_failure) : absl::UnavailableError(call_failure);
  }
  const bool call_ok = st.ok() && !Retryable(upstream_status);
  // A whole answer (or the prefill phase's) has its first token at its end; a stream that
  // ended without one gives its charge back here, with no time to learn from.
  if (call_ok && upstream_status == 200 && !first_token) OnFirstToken(/*observe=*/prefill_phase || !req.stream);
  // A 429 is retried elsewhere (Retryable) but is no fault of the engine's: it does not count
  // toward ejection.
  gw->Finished({b, rank}, call_ok || upstream_status == 429, queued, std::exchange(decode_kv, 0));
  if (call_ok && prefill_phase) {
    if (upstream_status == 200) {
      l.unlock();
      return AfterPrefill(b);
    }
    // A 4xx from the prefill engine is the client's problem: pass it on.
    status_sent = upstream_status;
    r->Respond(net::HttpResponse{upstream_status, "application/json", held, {}});
    return Finish(upstream_status);
  }
  if (call_ok) {
    if (!header_sent) {
      // A whole answer, held to its end: one response with its length.
      status_sent = upstream_status;
      bytes_out += held.size();
      r->Respond(net::HttpResponse{upstream_status, content_type, std::move(held), ClientHeaders()});
      held.clear();
    } else {
      r->End();
    }
    return Finish(status_sent);
  }
  last_error = !st.ok() ? fmt::format("{}: {}", b->config.name, std::string(st.message()))
               : fmt::format("{} answered {}", b->config.name, upstream_status);
  if (!call_failure.empty()) last_error = call_failure;
  if (upstream_status == 200) {
    // A 200 that failed before its first token: nothing of it is worth passing on.
    held.clear();
    upstream_status = 0;
  }
  if (!header_sent) {
    // Nothing reached the client yet: another backend may still answer it.
    if (attempts < gw->config().max_attempts && gw->SpendRetry()) {
      l.unlock();
      return Dispatch();
    }
    if (upstream_status > 0 && !held.empty()) {
      status_sent = upstream_status;
      r->Respond(net::HttpResponse{upstream_status, "application/json", held, {}});
      return Finish(upstream_status);
    }
    return FinishWithError(StatusFor(st), "upstream_error",
                           fmt::format("upstream failed ({} stage): {}",
                                       net::CallStageName(stage), last_error));
  }
  // Mid-stream: the status line is gone. An SSE client gets an error event and the end of the
  // stream; any other body can only be cut short.
  if (req.stream) {
    json e = {{"error",
               {{"message", fmt::format("upstream failed mid-stream: {}", last_error)},
                {"type", "upstream_error"},
                {"code", StatusFor(st)}}}};
    r->Write("data: " + net::JsonText(e) + "\n\n");
    r->End();
  } else {
    r->Abort();
  }
  Finish(status_sent);
}

void Exchange::AfterPrefill(std::shared_ptr<Backend> prefill) {
  std::lock_guard l(mu);
  if (finished || cancelled) return;
  const auto handoff_begin = Clock::now();
  json answer = json::parse(held, nullptr, false);
  json body = req.body;
  if (answer.is_object() && answer.contains("kv_transfer_params") &&
      answer["kv_transfer_params"].is_object()) {
    body["kv_transfer_params"] = answer["kv_transfer_params"];
  } else {
    // The prefill engine did not hand over its KV: the decode engine computes the prompt.
    decision += "; prefill gave no kv_transfer_params";
  }
  held.clear();
  upstream_status = 0;
  first_byte = false;
  queued = 0;
  // The decode engine is chosen now that the prompt is computed, from the decode loads of this
  // moment (the simulator's hand-off does the same); the one admission saw is the fallback.
  // (Lock order: the exchange's, then the gateway's, as everywhere.)
  if (auto [now_d, now_rank] = gw->PickDecodeAfterPrefill(*this); now_d) {
    decode_backend = now_d;
    decode_rank = now_rank;
  }
  std::shared_ptr<Backend> d = decode_backend;
  rank = decode_rank;
  // Its KV at most: the prompt and the whole answer (the simulator charges a decode unit alike).
  decode_kv = std::max<int64_t>(1, input_tokens + static_cast<int64_t>(req.n) * req.max_tokens);
  gw->HandOff({d, rank}, decode_kv);
  if (spans) spans->HandOff(handoff_begin, Clock::now(), prefill->config.name, d->config.name, rank);
  decision += fmt::format("; prefilled on {}", prefill->config.name);
  prefill_backend = prefill->config.name;
  // The decode engine counts the KV it received as cached; the prefill engine's own figure is
  // what its cache saved (X-Myriad-Prefill-Cached-Tokens).
  if (answer.is_object() && answer.contains("usage") && answer["usage"].is_object()) {
    const json& u = answer["usage"];
    if (u.contains("prompt_tokens_details") && u["prompt_tokens_details"].is_object() &&
        u["prompt_tokens_details"].contains("cached_tokens") &&
        u["prompt_tokens_details"]["cached_tokens"].is_number_unsigned()) {
      prefill_cached = u["prompt_tokens_details"]["cached_tokens"].get<int64_t>();
    }
  }
  StartCall(d, net::JsonText(body), false);
}

void Exchange::Refuse(net::HttpResponse response, std::string_view reason) {
  std::lock_guard l(mu);
  reject_reason = reason;
  status_sent = response.status;
  r->Respond(std::move(response));
  Finish(status_sent);
}

void Exchange::OnFirstToken(bool observe) {
  first_token = true;
  const bool learn = cost_pending && observe;
  cost_pending = false;
  if (learn) cost_sample.seconds = std::chrono::duration<double>(Clock::now() - call_start).count();
  gw->FirstToken({backend, rank}, queued, learn ? &cost_sample : nullptr);
  queued = 0;
}

void Exchange::FinishWithError(int status, std::string_view type, const std::string& message) {
  status_sent = status;
  if (!header_sent) r->Respond(net::JsonError(status, type, message));
  else r->Abort();
  Finish(status);
}

void Exchange::Finish(int status) {
  if (finished) return;
  finished = true;
  const auto now = Clock::now();
  const double ttft_s =
      meter.has_first_token() ? std::chrono::duration<double>(meter.first_token() - start).count() : -1.0;
  const int64_t prompt_tokens = meter.usage_prompt_tokens() >= 0 ? meter.usage_prompt_tokens()
                                : status < 400                   ? input_tokens
                                                                 : -1;
  gw->Record(req.chat, status,
             RequestOutcome{.model = model_served ? std::string_view(req.model) : std::string_view(),
                            .tenant = tenant_name,
                            .reject_reason = reject_reason,
                            .ok = status < 400,
                            .duration_s = std::chrono::duration<double>(now - start).count(),
                            .ttft_s = ttft_s,
                            .meter = &meter,
                            .prompt_tokens = prompt_tokens,
                            .output_tokens = meter.output_tokens(),
                            .version = version});
  if (spans) {
    spans->Finish(now, RequestTrace::Outcome{.route = req.chat ? "/v1/chat/completions" : "/v1/completions",
                                             .chat = req.chat,
                                             .model = req.model,
                                             .tenant = tenant_name,
                                             .client = client,
                                             .backend = backend ? std::string_view(backend->config.name) : "",
                                             .reject_reason = reject_reason,
                                             .error = last_error,
                                             .stream = req.stream,
                                             .status = status,
                                             .attempts = attempts,
                                             .input_tokens = prompt_tokens,
                                             .output_tokens = meter.output_tokens(),
                                             .ttft_s = ttft_s});
  }
  if (!gw->LogEnabled()) {
    call.reset();
    r.reset();
    return;
  }
  json line = {{"time", FormatRfc3339Millis(arrived_unix_ns)},
               {"client", client},
               {"trace_id", trace.trace_id},
               {"route", net::RouteName(req.chat)},
               {"model", req.model},
               {"tenant", tenant_name},
               {"stream", req.stream},
               {"status", status},
               {"backend", backend ? backend->config.name : ""},
               {"decode_backend", pd && decode_backend ? decode_backend->config.name : ""},
               {"attempts", attempts},
               {"tried", tried},
               {"decision", decision},
               {"cached_tokens_est", cached_tokens},
               {"input_tokens_est", input_tokens},
               {"first_byte_ms", first_byte ? Ms(first - start) : -1.0},
               {"ttft_ms", ttft_s >= 0 ? ttft_s * 1e3 : -1.0},
               {"duration_ms", Ms(now - start)},
               {"prompt_tokens", prompt_tokens},
               {"output_tokens", meter.output_tokens()},
               {"bytes", bytes_out}};
  if (!reject_reason.empty()) line["reason"] = reject_reason;
  if (!last_error.empty()) line["error"] = last_error;
  if (!version.empty()) line["version"] = version;
  if (version_fallback) line["version_fallback"] = "the canary has no available backend: served by stable";
  gw->Log(net::JsonText(line));
  call.reset();
  r.reset();
}

}  // namespace myriad::gateway
