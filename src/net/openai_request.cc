#include "net/openai_request.h"

#include <cmath>
#include <limits>

#include <fmt/format.h>

namespace myriad::net {

using json = nlohmann::json;

HttpResponse RequestError::Response() const {
  return JsonError(status, status == 404 ? "NotFoundError" : "invalid_request_error", message, param);
}

namespace {

bool Fail(RequestError* e, std::string message, std::string param) {
  e->status = 400;
  e->message = std::move(message);
  e->param = std::move(param);
  return false;
}

// The checks of one JSON object's fields. `where` prefixes field names in messages
// ("stream_options."); `param` is the top-level field reported in the error's param, as OpenAI
// names the request field and not the path inside it. Absent and null fields are left as they
// are: every field here is optional unless the caller says otherwise.
class Fields {
 public:
  Fields(const json& object, std::string where, std::string param, RequestError* error)
      : object_(object), where_(std::move(where)), param_(std::move(param)), error_(error) {}

  const json* Find(const char* key) const {
    auto it = object_.find(key);
    return it == object_.end() || it->is_null() ? nullptr : &*it;
  }

  bool Bool(const char* key, bool* out) {
    const json* v = Find(key);
    if (!v) return true;
    if (!v->is_boolean()) return Fail(error_, fmt::format("'{}{}' must be a boolean", where_, key), ParamOf(key));
    *out = v->get<bool>();
    return true;
  }

  // JSON integers only: 3.0 is refused, as a token count or a seed with a fraction is a
  // client bug worth naming.
  bool Int(const char* key, int64_t lo, int64_t hi, int64_t* out) {
    const json* v = Find(key);
    if (!v) return true;
    bool ok = false;
    int64_t x = 0;
    if (v->is_number_unsigned()) {
      const uint64_t u = v->get<uint64_t>();
      ok = hi >= 0 && u <= static_cast<uint64_t>(hi) && static_cast<int64_t>(u) >= lo;
      x = static_cast<int64_t>(u);
    } else if (v->is_number_integer()) {
      x = v->get<int64_t>();
      ok = x >= lo && x <= hi;
    }
    if (!ok) {
      return Fail(error_, fmt::format("'{}{}' must be an integer in [{}, {}]", where_, key, lo, hi), ParamOf(key));
    }
    if (out) *out = x;
    return true;
  }

  // A number in [lo, hi], or (lo, hi] when lo_open.
  bool Number(const char* key, double lo, double hi, bool lo_open = false) {
    const json* v = Find(key);
    if (!v) return true;
    const double x = v->is_number() ? v->get<double>() : std::nan("");
    if (!(lo_open ? x > lo : x >= lo) || !(x <= hi)) {
      return Fail(error_, fmt::format("'{}{}' must be a number in {}{}, {}]", where_, key, lo_open ? '(' : '[', lo, hi),
                  ParamOf(key));
    }
    return true;
  }

  bool String(const char* key, std::string* out) {
    const json* v = Find(key);
    if (!v) return true;
    if (!v->is_string()) return Fail(error_, fmt::format("'{}{}' must be a string", where_, key), ParamOf(key));
    if (out) *out = v->get<std::string>();
    return true;
  }

  bool Object(const char* key) {
    const json* v = Find(key);
    if (v && !v->is_object()) return Fail(error_, fmt::format("'{}{}' must be an object", where_, key), ParamOf(key));
    return true;
  }

 private:
  std::string ParamOf(const char* key) const { return param_.empty() ? key : param_; }

  const json& object_;
  std::string where_, param_;
  RequestError* error_;
};

bool TokenId(const json& t, uint32_t* out) {
  if (!t.is_number_unsigned() || t.get<uint64_t>() > std::numeric_limits<uint32_t>::max()) return false;
  *out = t.get<uint32_t>();
  return true;
}

bool ParseMessages(const json& b, GenerateRequest* out, RequestError* error) {
  auto msgs = b.find("messages");
  if (msgs == b.end() || !msgs->is_array() || msgs->empty()) {
    return Fail(error, "'messages' must be a non-empty array", "messages");
  }
  for (size_t i = 0; i < msgs->size(); ++i) {
    const json& m = (*msgs)[i];
    const std::string where = fmt::format("messages[{}]", i);
    if (!m.is_object()) return Fail(error, where + " must be an object", "messages");
    auto role = m.find("role");
    if (role == m.end() || !role->is_string()) return Fail(error, where + ".role must be a string", "messages");
    ChatMessage msg{.role = role->get<std::string>(), .content = {}};
    auto content = m.find("content");
    if (content == m.end() || content->is_null()) {
      // An assistant turn with tool calls only has no content.
    } else if (content->is_string()) {
      msg.content = content->get<std::string>();
    } else if (content->is_array()) {
      for (size_t j = 0; j < content->size(); ++j) {
        const json& part = (*content)[j];
        const std::string at = fmt::format("{}.content[{}]", where, j);
        if (!part.is_object()) return Fail(error, at + " must be an object", "messages");
        // vLLM reads a part without "type" by its keys ({"text": ...}); OpenAI's parts have one.
        auto type = part.find("type");
        if (type != part.end() && !type->is_string()) return Fail(error, at + ".type must be a string", "messages");
        const bool text_part = type == part.end() || type->get_ref<const std::string&>() == "text";
        if (!text_part) continue;  // images, audio: no text to count
        auto text = part.find("text");
        if (text == part.end() || !text->is_string()) {
          if (type == part.end()) continue;
          return Fail(error, at + ".text must be a string", "messages");
        }
        msg.content += text->get_ref<const std::string&>();
      }
    } else {
      return Fail(error, where + ".content must be a string or an array of parts", "messages");
    }
    out->text += msg.role;
    out->text += '\n';
    out->text += msg.content;
    out->text += '\n';
    out->messages.push_back(std::move(msg));
  }
  return true;
}

bool ParsePrompt(const json& b, GenerateRequest* out, RequestError* error) {
  auto prompt = b.find("prompt");
  if (prompt == b.end() || prompt->is_null()) return Fail(error, "'prompt' is required", "prompt");
  const json* p = &*prompt;
  if (p->is_array() && p->size() > 1 && ((*p)[0].is_string() || (*p)[0].is_array())) {
    return Fail(error, "batched prompts (several in one 'prompt') are not supported: send one request per prompt",
                "prompt");
  }
  // One prompt in an array: ["text"] or [[ids]].
  if (p->is_array() && p->size() == 1 && ((*p)[0].is_string() || (*p)[0].is_array())) p = &(*p)[0];
  if (p->is_string()) {
    out->text = p->get<std::string>();
  } else if (p->is_array() && !p->empty() && (*p)[0].is_number()) {
    out->token_ids.reserve(p->size());
    for (const auto& t : *p) {
      uint32_t id = 0;
      if (!TokenId(t, &id)) return Fail(error, "'prompt' token ids must be integers in [0, 2^32)", "prompt");
      out->token_ids.push_back(id);
    }
  } else if (!(p->is_array() && p->empty())) {
    return Fail(error, "'prompt' must be a string, an array of token ids, or an array holding one of these",
                "prompt");
  }
  if (out->text.empty() && out->token_ids.empty()) return Fail(error, "'prompt' is empty", "prompt");
  return true;
}

// vLLM's P/D protocol: which side of a disaggregated request this is.
bool ParseKvTransfer(const json& b, GenerateRequest* out, RequestError* error) {
  auto kv = b.find("kv_transfer_params");
  if (kv == b.end() || kv->is_null()) return true;
  if (!kv->is_object()) return Fail(error, "'kv_transfer_params' must be an object", "kv_transfer_params");
  Fields f(*kv, "kv_transfer_params.", "kv_transfer_params", error);
  if (!f.Bool("do_remote_decode", &out->remote_decode) || !f.Bool("do_remote_prefill", &out->remote_prefill)) {
    return false;
  }
  if (!out->remote_prefill) return true;
  const json* blocks = f.Find("remote_block_ids");
  bool ok = blocks && blocks->is_array();
  for (size_t i = 0; ok && i < blocks->size(); ++i) ok = (*blocks)[i].is_number_unsigned();
  if (!ok) {
    return Fail(error, "'kv_transfer_params.remote_block_ids' must be an array of block ids when do_remote_prefill is true",
                "kv_transfer_params");
  }
  return true;
}

// Sampling fields: checked so a bad value is refused the same everywhere, not used (the
// gateway forwards them, the emulator's output does not depend on them).
bool CheckSampling(Fields& f, bool chat, RequestError* error) {
  if (!f.Number("temperature", 0, kMaxTemperature) || !f.Number("top_p", 0, 1, true) ||
      !f.Number("presence_penalty", -2, 2) || !f.Number("frequency_penalty", -2, 2) ||
      !f.Int("seed", std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(), nullptr)) {
    return false;
  }
  if (const json* stop = f.Find("stop")) {
    bool ok = stop->is_string() || (stop->is_array() && stop->size() <= static_cast<size_t>(kMaxStopStrings));
    for (size_t i = 0; ok && stop->is_array() && i < stop->size(); ++i) ok = (*stop)[i].is_string();
    if (!ok) return Fail(error, fmt::format("'stop' must be a string or an array of at most {} strings", kMaxStopStrings), "stop");
  }
  if (const json* ids = f.Find("stop_token_ids")) {
    bool ok = ids->is_array() && ids->size() <= static_cast<size_t>(kMaxStopStrings);
    uint32_t id = 0;
    for (size_t i = 0; ok && i < ids->size(); ++i) ok = TokenId((*ids)[i], &id);
    if (!ok) {
      return Fail(error, fmt::format("'stop_token_ids' must be an array of at most {} token ids", kMaxStopStrings),
                  "stop_token_ids");
    }
  }
  if (chat) {
    bool logprobs = false;
    return f.Bool("logprobs", &logprobs) && f.Int("top_logprobs", 0, kMaxLogprobs, nullptr);
  }
  return f.Int("logprobs", 0, kMaxLogprobs, nullptr);
}

}  // namespace

std::string BearerToken(const Headers& headers) {
  const std::string* h = FindHeader(headers, "Authorization");
  if (!h || h->size() < 7) return "";
  std::string_view v = *h;
  if (v.substr(0, 7) != "Bearer " && v.substr(0, 7) != "bearer ") return "";
  v.remove_prefix(7);
  while (!v.empty() && v.front() == ' ') v.remove_prefix(1);
  while (!v.empty() && v.back() == ' ') v.remove_suffix(1);
  return std::string(v);
}

bool ParseGenerateRequest(std::string_view body, bool chat, GenerateRequest* out, RequestError* error,
                          const ParseOptions& options) {
  out->body = json::parse(body, nullptr, false);
  if (out->body.is_discarded()) return Fail(error, "the body is not valid JSON", "");
  if (!out->body.is_object()) return Fail(error, "the body must be a JSON object", "");
  const json& b = out->body;
  out->chat = chat;
  out->max_tokens = options.default_max_tokens;
  Fields f(b, "", "", error);
  if (const json* model = f.Find("model")) {
    if (!model->is_string() || model->get_ref<const std::string&>().empty()) {
      return Fail(error, "'model' must be a non-empty string", "model");
    }
    out->model = model->get<std::string>();
  } else if (options.require_model) {
    return Fail(error, "'model' is required", "model");
  }
  if (!f.Bool("stream", &out->stream)) return false;
  // max_completion_tokens after max_tokens: where both are sent, it is the one that counts
  // (OpenAI deprecated max_tokens for chat in its favour; vLLM reads it first).
  for (const char* key : {"max_tokens", "max_completion_tokens"}) {
    if (!f.Int(key, 1, kMaxRequestTokens, &out->max_tokens)) return false;
  }
  if (!f.Int("n", 1, kMaxChoices, &out->n)) return false;
  if (out->n > options.max_n) {
    return Fail(error, fmt::format("'n' = {} is not supported: this server makes at most {} choice(s) per request",
                                   out->n, options.max_n),
                "n");
  }
  if (!f.Int("priority", std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max(), &out->priority) ||
      !f.String("user", &out->user) || !CheckSampling(f, chat, error)) {
    return false;
  }
  // vLLM's prefix-cache isolation: only requests with the same salt share cached KV.
  if (const json* salt = f.Find("cache_salt")) {
    if (!salt->is_string() || salt->get_ref<const std::string&>().empty()) {
      return Fail(error, "Parameter 'cache_salt' must be a non-empty string if provided.", "cache_salt");
    }
    out->cache_salt = salt->get<std::string>();
  }
  if (!f.Object("stream_options")) return false;
  if (const json* so = f.Find("stream_options")) {
    // vLLM's rule (its request models' validate_stream_options): options for a stream on a
    // request that does not stream are an error, not ignored. An empty object passes, as there.
    if (!so->empty() && !out->stream) {
      return Fail(error, "Stream options can only be defined when `stream=True`.", "stream_options");
    }
    // As vLLM's StreamOptions: include_usage defaults to true once stream_options is given.
    out->include_usage = true;
    Fields sf(*so, "stream_options.", "stream_options", error);
    bool continuous = false;
    if (!sf.Bool("include_usage", &out->include_usage) || !sf.Bool("continuous_usage_stats", &continuous)) {
      return false;
    }
  }
  if (!ParseKvTransfer(b, out, error)) return false;
  return chat ? ParseMessages(b, out, error) : ParsePrompt(b, out, error);
}

}  // namespace myriad::net
