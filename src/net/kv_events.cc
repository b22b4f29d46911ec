// Decoding of vLLM's KV-event batches; the field layout is described in kv_events.h.
#include "net/kv_events.h"

#include <limits>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include <fmt/format.h>
#include "net/msgpack_scan.h"

namespace myriad::net {
namespace {

using nlohmann::json;

// Real batches nest four deep (batch, events, event, hashes) plus whatever extra_keys holds.
constexpr int kMaxDepth = 64;

absl::Status FieldError(std::string_view path, std::string_view what) {
  return absl::InvalidArgumentError(fmt::format("{}: {}", path, what));
}

std::string Sub(std::string_view path, std::string_view field) {
  return path.empty() ? std::string(field) : fmt::format("{}.{}", path, field);
}

// A struct's fields, by position in the array form (after the tag, if tagged) or by name in
// the map form. Absent (omitted or missing) fields come back as nullptr; nil is present.
class Fields {
 public:
  Fields(const json& j, size_t first) : j_(j), first_(first) {}

  const json* Get(size_t index, const char* name) const {
    if (j_.is_array()) {
      const size_t i = first_ + index;
      return i < j_.size() ? &j_[i] : nullptr;
    }
    const auto it = j_.find(name);
    return it == j_.end() ? nullptr : &*it;
  }

  absl::StatusOr<const json*> Required(size_t index, const char* name,
                                       std::string_view path) const {
    const json* v = Get(index, name);
    if (v != nullptr) return v;
    if (j_.is_array()) {
      return FieldError(Sub(path, name), fmt::format("missing (the array has {} elements)", j_.size()));
    }
    return FieldError(Sub(path, name), "missing");
  }

 private:
  const json& j_;
  size_t first_;
};

bool AsUint(const json& v, uint64_t* out) {
  if (v.is_number_unsigned()) {
    *out = v.get<uint64_t>();
    return true;
  }
  if (v.is_number_integer() && v.get<int64_t>() >= 0) {
    *out = static_cast<uint64_t>(v.get<int64_t>());
    return true;
  }
  return false;
}

absl::StatusOr<EngineBlockHash> ReadHash(const json& v, std::string_view path) {
  uint64_t h = 0;
  if (AsUint(v, &h)) return h;
  if (v.is_binary()) return EngineHashFromBytes(v.get_binary());
  return FieldError(path, "expected a non-negative integer or bytes");
}

absl::Status ReadHashes(const json& v, std::string_view path, std::vector<EngineBlockHash>* out) {
  if (!v.is_array()) return FieldError(path, "expected an array");
  out->reserve(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    auto h = ReadHash(v[i], fmt::format("{}[{}]", path, i));
    if (!h.ok()) return h.status();
    out->push_back(*h);
  }
  return absl::OkStatus();
}

absl::Status ReadTokens(const json& v, std::string_view path, std::vector<uint32_t>* out) {
  if (!v.is_array()) return FieldError(path, "expected an array");
  out->reserve(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    uint64_t t = 0;
    if (!AsUint(v[i], &t) || t > std::numeric_limits<uint32_t>::max()) {
      return FieldError(fmt::format("{}[{}]", path, i), "expected an integer in [0, 2^32)");
    }
    out->push_back(static_cast<uint32_t>(t));
  }
  return absl::OkStatus();
}

absl::Status ReadOptionalString(const json* v, std::string_view path,
                                std::optional<std::string>* out) {
  if (v == nullptr || v->is_null()) return absl::OkStatus();
  if (!v->is_string()) return FieldError(path, "expected a string or nil");
  *out = v->get<std::string>();
  return absl::OkStatus();
}

absl::Status ReadOptionalInt(const json* v, std::string_view path, std::optional<int64_t>* out) {
  if (v == nullptr || v->is_null()) return absl::OkStatus();
  if (v->is_number_unsigned() && v->get<uint64_t>() > std::numeric_limits<int64_t>::max()) {
    return FieldError(path, "integer out of range");
  }
  if (!v->is_number_integer()) return FieldError(path, "expected an integer or nil");
  *out = v->get<int64_t>();
  return absl::OkStatus();
}

#define MYRIAD_RETURN_IF_ERROR(expr)        \
  do {                                      \
    if (absl::Status s_ = (expr); !s_.ok()) \
      return s_;                            \
  } while (0)

#define MYRIAD_CONCAT_INNER(a, b) a##b
#define MYRIAD_CONCAT(a, b) MYRIAD_CONCAT_INNER(a, b)
#define MYRIAD_ASSIGN_OR_RETURN(lhs, expr)                                         \
  auto MYRIAD_CONCAT(status_or_, __LINE__) = (expr);                               \
  if (!MYRIAD_CONCAT(status_or_, __LINE__).ok())                                   \
    return MYRIAD_CONCAT(status_or_, __LINE__).status();                           \
  lhs = std::move(*MYRIAD_CONCAT(status_or_, __LINE__))

absl::StatusOr<KvEvent> DecodeBlockStored(const Fields& f, std::string_view path) {
  BlockStored e;
  const json* v = nullptr;
  MYRIAD_ASSIGN_OR_RETURN(v, f.Required(0, "block_hashes", path));
  MYRIAD_RETURN_IF_ERROR(ReadHashes(*v, Sub(path, "block_hashes"), &e.block_hashes));
  MYRIAD_ASSIGN_OR_RETURN(v, f.Required(1, "parent_block_hash", path));
  if (!v->is_null()) {
    MYRIAD_ASSIGN_OR_RETURN(e.parent_block_hash, ReadHash(*v, Sub(path, "parent_block_hash")));
  }
  MYRIAD_ASSIGN_OR_RETURN(v, f.Required(2, "token_ids", path));
  MYRIAD_RETURN_IF_ERROR(ReadTokens(*v, Sub(path, "token_ids"), &e.token_ids));
  MYRIAD_ASSIGN_OR_RETURN(v, f.Required(3, "block_size", path));
  uint64_t block_size = 0;
  if (!AsUint(*v, &block_size) || block_size == 0 ||
      block_size > static_cast<uint64_t>(std::numeric_limits<int32_t>::max())) {
    return FieldError(Sub(path, "block_size"), "expected a positive integer");
  }
  e.block_size = static_cast<uint32_t>(block_size);
  // 4: lora_id, deprecated and superseded by lora_name; not read. 5..: added over time, so
  // older releases omit them.
  MYRIAD_RETURN_IF_ERROR(ReadOptionalString(f.Get(5, "medium"), Sub(path, "medium"), &e.medium));
  MYRIAD_RETURN_IF_ERROR(
      ReadOptionalString(f.Get(6, "lora_name"), Sub(path, "lora_name"), &e.lora_name));
  // 7: extra_keys (multimodal ids, cache salt): Myriad keys blocks by tokens and LoRA only.
  MYRIAD_RETURN_IF_ERROR(
      ReadOptionalInt(f.Get(8, "group_idx"), Sub(path, "group_idx"), &e.group_idx));
  return e;
}

absl::StatusOr<KvEvent> DecodeBlockRemoved(const Fields& f, std::string_view path) {
  BlockRemoved e;
  const json* v = nullptr;
  MYRIAD_ASSIGN_OR_RETURN(v, f.Required(0, "block_hashes", path));
  MYRIAD_RETURN_IF_ERROR(ReadHashes(*v, Sub(path, "block_hashes"), &e.block_hashes));
  MYRIAD_RETURN_IF_ERROR(ReadOptionalString(f.Get(1, "medium"), Sub(path, "medium"), &e.medium));
  MYRIAD_RETURN_IF_ERROR(
      ReadOptionalInt(f.Get(2, "group_idx"), Sub(path, "group_idx"), &e.group_idx));
  return e;
}

// Appends the event to batch->events, or counts it in unknown_events when its tag is new.
absl::Status DecodeEvent(const json& j, std::string_view path, KvEventBatch* batch) {
  const json* tag = nullptr;
  size_t first = 0;
  if (j.is_array()) {
    if (j.empty() || !j[0].is_string()) {
      return FieldError(fmt::format("{}[0]", path), "expected the event's tag (a string)");
    }
    tag = &j[0];
    first = 1;
  } else if (j.is_object()) {
    const auto it = j.find("type");
    if (it == j.end()) return FieldError(Sub(path, "type"), "missing");
    if (!it->is_string()) return FieldError(Sub(path, "type"), "expected a string");
    tag = &*it;
  } else {
    return FieldError(path, "expected an array or a map");
  }
  const Fields fields(j, first);
  const auto& name = tag->get_ref<const std::string&>();
  absl::StatusOr<KvEvent> event;
  if (name == "BlockStored") {
    event = DecodeBlockStored(fields, path);
  } else if (name == "BlockRemoved") {
    event = DecodeBlockRemoved(fields, path);
  } else if (name == "AllBlocksCleared") {
    event = AllBlocksCleared{};
  } else {
    ++batch->unknown_events;
    return absl::OkStatus();
  }
  if (!event.ok()) return event.status();
  batch->events.push_back(std::move(*event));
  return absl::OkStatus();
}

absl::StatusOr<KvEventBatch> DecodeBatch(const json& j) {
  if (!j.is_array() && !j.is_object()) return FieldError("batch", "expected an array or a map");
  const Fields f(j, 0);
  KvEventBatch batch;
  const json* v = nullptr;
  MYRIAD_ASSIGN_OR_RETURN(v, f.Required(0, "ts", ""));
  if (!v->is_number()) return FieldError("ts", "expected a number");
  batch.ts = v->get<double>();
  MYRIAD_ASSIGN_OR_RETURN(v, f.Required(1, "events", ""));
  if (!v->is_array()) return FieldError("events", "expected an array");
  batch.events.reserve(v->size());
  for (size_t i = 0; i < v->size(); ++i) {
    MYRIAD_RETURN_IF_ERROR(DecodeEvent((*v)[i], fmt::format("events[{}]", i), &batch));
  }
  std::optional<int64_t> rank;
  MYRIAD_RETURN_IF_ERROR(ReadOptionalInt(f.Get(2, "data_parallel_rank"), "data_parallel_rank",
                                         &rank));
  if (rank) {
    if (*rank < 0 || *rank > std::numeric_limits<int>::max()) {
      return FieldError("data_parallel_rank", "out of range");
    }
    batch.dp_rank = static_cast<int>(*rank);
  }
  return batch;
}

}  // namespace

uint64_t EngineHashFromBytes(std::span<const uint8_t> digest) {
  const size_t n = digest.size() < 8 ? digest.size() : 8;
  uint64_t h = 0;
  for (uint8_t b : digest.last(n)) h = (h << 8) | b;
  return h;
}

absl::StatusOr<KvEventBatch> DecodeKvEventBatch(std::span<const uint8_t> payload) {
  MYRIAD_RETURN_IF_ERROR(CheckMsgpack(payload, kMaxDepth));
  // strict: the whole payload is one value; no exceptions: a parse error is `discarded`.
  json j;
  try {
    j = json::from_msgpack(payload.begin(), payload.end(), /*strict=*/true,
                           /*allow_exceptions=*/false);
  } catch (const json::exception& e) {  // the library's own limits; not expected after the check
    return absl::InvalidArgumentError(fmt::format("msgpack: {}", e.what()));
  }
  if (j.is_discarded()) return absl::InvalidArgumentError("msgpack: not a valid document");
  return DecodeBatch(j);
}

}  // namespace myriad::net
