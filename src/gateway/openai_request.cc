#include "gateway/openai_request.h"

#include <fmt/format.h>

namespace myriad::gateway {

using json = nlohmann::json;

net::HttpResponse RequestError::Response() const {
  return net::JsonError(status, status == 404 ? "NotFoundError" : "invalid_request_error", message,
                        param);
}

namespace {

bool Fail(RequestError* e, std::string message, std::string param, int status = 400) {
  e->status = status;
  e->message = std::move(message);
  e->param = std::move(param);
  return false;
}

// Appends a message's content: a string, or an array of parts of which the text ones count.
bool AppendContent(const json& content, std::string* text) {
  if (content.is_null()) return true;
  if (content.is_string()) {
    *text += content.get_ref<const std::string&>();
    return true;
  }
  if (!content.is_array()) return false;
  for (const auto& part : content) {
    if (!part.is_object()) return false;
    auto t = part.find("text");
    if (t != part.end() && t->is_string()) *text += t->get_ref<const std::string&>();
  }
  return true;
}

}  // namespace

std::string BearerToken(const net::Headers& headers) {
  const std::string* h = net::FindHeader(headers, "Authorization");
  if (!h || h->size() < 7) return "";
  std::string_view v = *h;
  if (v.substr(0, 7) != "Bearer " && v.substr(0, 7) != "bearer ") return "";
  v.remove_prefix(7);
  while (!v.empty() && v.front() == ' ') v.remove_prefix(1);
  while (!v.empty() && v.back() == ' ') v.remove_suffix(1);
  return std::string(v);
}

bool ParseGenerateRequest(std::string_view body, bool chat, GenerateRequest* out,
                          RequestError* error) {
  out->body = json::parse(body, nullptr, false);
  if (out->body.is_discarded()) return Fail(error, "the body is not valid JSON", "");
  if (!out->body.is_object()) return Fail(error, "the body must be a JSON object", "");
  const json& b = out->body;
  out->chat = chat;
  auto model = b.find("model");
  if (model == b.end() || !model->is_string() || model->get_ref<const std::string&>().empty()) {
    return Fail(error, "'model' is required and must be a string", "model");
  }
  out->model = model->get<std::string>();
  if (auto s = b.find("stream"); s != b.end() && !s->is_null()) {
    if (!s->is_boolean()) return Fail(error, "'stream' must be a boolean", "stream");
    out->stream = s->get<bool>();
  }
  for (const char* key : {"max_tokens", "max_completion_tokens"}) {
    auto m = b.find(key);
    if (m == b.end() || m->is_null()) continue;
    if (!m->is_number_integer() || m->get<int64_t>() < 1) {
      return Fail(error, fmt::format("'{}' must be an integer >= 1", key), key);
    }
    out->max_tokens = m->get<int64_t>();
  }
  // vLLM's prefix-cache isolation: only requests with the same salt share cached KV.
  if (auto salt = b.find("cache_salt"); salt != b.end() && !salt->is_null()) {
    if (!salt->is_string() || salt->get_ref<const std::string&>().empty()) {
      return Fail(error, "'cache_salt' must be a non-empty string if provided", "cache_salt");
    }
    out->cache_salt = salt->get<std::string>();
  }
  if (auto so = b.find("stream_options"); so != b.end() && !so->is_null() && !so->is_object()) {
    return Fail(error, "'stream_options' must be an object", "stream_options");
  }
  // vLLM's rule (its request models' validate_stream_options): options for a stream on a
  // request that does not stream are an error, not ignored. An empty object passes, as there.
  if (auto so = b.find("stream_options"); so != b.end() && so->is_object() && !so->empty() && !out->stream) {
    return Fail(error, "Stream options can only be defined when `stream=True`.", "stream_options");
  }
  if (chat) {
    auto msgs = b.find("messages");
    if (msgs == b.end() || !msgs->is_array() || msgs->empty()) {
      return Fail(error, "'messages' must be a non-empty array", "messages");
    }
    for (size_t i = 0; i < msgs->size(); ++i) {
      const json& m = (*msgs)[i];
      const std::string where = fmt::format("messages[{}]", i);
      if (!m.is_object()) return Fail(error, where + " must be an object", "messages");
      auto role = m.find("role");
      if (role == m.end() || !role->is_string()) {
        return Fail(error, where + ".role must be a string", "messages");
      }
      out->text += role->get_ref<const std::string&>();
      out->text += '\n';
      auto content = m.find("content");
      if (content != m.end() && !AppendContent(*content, &out->text)) {
        return Fail(error, where + ".content must be a string or an array of parts", "messages");
      }
      out->text += '\n';
    }
    return true;
  }
  auto prompt = b.find("prompt");
  if (prompt == b.end()) return Fail(error, "'prompt' is required", "prompt");
  if (prompt->is_string()) {
    out->text = prompt->get<std::string>();
  } else if (prompt->is_array() && prompt->size() == 1 && (*prompt)[0].is_string()) {
    out->text = (*prompt)[0].get<std::string>();
  } else if (prompt->is_array() && !prompt->empty() && (*prompt)[0].is_number()) {
    for (const auto& t : *prompt) {
      if (!t.is_number_unsigned() || t.get<uint64_t>() > UINT32_MAX) {
        return Fail(error, "'prompt' token ids must be integers in [0, 2^32)", "prompt");
      }
      out->token_ids.push_back(t.get<uint32_t>());
    }
  } else {
    return Fail(error, "'prompt' must be a string, a one-string array or an array of token ids",
                "prompt");
  }
  if (out->text.empty() && out->token_ids.empty()) return Fail(error, "'prompt' is empty", "prompt");
  return true;
}

}  // namespace myriad::gateway
