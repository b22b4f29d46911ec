// Decoding of vLLM's KV-event batches; the field layout is described in kv_events.h. The
// payload is parsed onto a reusable tape (net/msgpack_tape.h) and read in place; the names of
// fields in error messages are formatted only when there is an error.
#include "net/kv_events.h"

#include <array>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "net/msgpack_tape.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace myriad::net {
namespace {

using Value = MsgpackTape::Value;

// Real batches nest four deep (batch, events, event, hashes) plus whatever extra_keys holds.
constexpr int kMaxDepth = 64;
// A thread's tape keeps its buffers between payloads up to this many nodes (24 bytes each).
constexpr size_t kTapeKeepNodes = size_t{1} << 18;

// Where a value sits, e.g. events[3].token_ids[5].
struct Where {
  int64_t event = -1;           // -1: the batch itself
  const char* field = nullptr;  // nullptr: the event itself
  int64_t element = -1;         // -1: the field itself

  Where Field(const char* f) const { return {event, f, -1}; }
  Where Element(size_t i) const { return {event, field, static_cast<int64_t>(i)}; }

  std::string str() const {
    std::string s = event >= 0 ? fmt::format("events[{}]", event) : std::string();
    if (field != nullptr) s = s.empty() ? std::string(field) : fmt::format("{}.{}", s, field);
    if (element >= 0) fmt::format_to(std::back_inserter(s), "[{}]", element);
    return s;
  }
};

absl::Status Error(const Where& where, std::string_view what) {
  return absl::InvalidArgumentError(fmt::format("{}: {}", where.str(), what));
}

// A struct's fields, by position in the array form (after the tag, if tagged) or by name in
// the map form. Absent (omitted or missing) fields come back empty; nil is present.
class Fields {
 public:
  Fields(Value v, size_t first) : v_(v), first_(first) {
    if (!v.is_array()) return;
    Value c = v.first_child();
    for (uint32_t i = 0; i < v.size() && n_ < positional_.size(); ++i, c = c.next_sibling()) {
      if (i >= first) positional_[n_++] = c;
    }
  }

  std::optional<Value> Get(size_t index, std::string_view name) const {
    if (v_.is_array()) {
      if (index < n_) return positional_[index];
      return std::nullopt;
    }
    Value k = v_.first_child();
    for (uint32_t i = 0; i < v_.size(); ++i) {
      const Value val = k.next_sibling();
      if (k.str() == name) return val;
      k = val.next_sibling();
    }
    return std::nullopt;
  }

  absl::StatusOr<Value> Required(size_t index, const char* name, const Where& where) const {
    if (auto v = Get(index, name)) return *v;
    if (v_.is_array()) {
      return Error(where.Field(name), fmt::format("missing (the array has {} elements)", v_.size()));
    }
    return Error(where.Field(name), "missing");
  }

 private:
  Value v_;
  size_t first_;
  std::array<Value, 12> positional_{};  // vLLM's structs have at most 11 fields
  size_t n_ = 0;
};

absl::StatusOr<EngineBlockHash> ReadHash(Value v, const Where& where) {
  uint64_t h = 0;
  if (v.AsUint(&h)) return h;
  // vLLM 0.9.0 to 0.10.1 publish Python's hash(), a signed 64-bit value: its two's complement
  // is the same 64 bits, so an engine's signed and unsigned spellings of a hash agree.
  if (int64_t s = 0; v.AsInt(&s)) return static_cast<uint64_t>(s);
  if (v.is_binary()) return EngineHashFromBytes(v.bytes());
  return Error(where, "expected an integer or bytes");
}

absl::Status ReadHashes(Value v, const Where& where, std::vector<EngineBlockHash>* out) {
  if (!v.is_array()) return Error(where, "expected an array");
  out->reserve(v.size());
  Value c = v.first_child();
  for (uint32_t i = 0; i < v.size(); ++i, c = c.next_sibling()) {
    auto h = ReadHash(c, where.Element(i));
    if (!h.ok()) return h.status();
    out->push_back(*h);
  }
  return absl::OkStatus();
}

absl::Status ReadTokens(Value v, const Where& where, std::vector<uint32_t>* out) {
  if (!v.is_array()) return Error(where, "expected an array");
  out->resize(v.size());
  Value c = v.first_child();
  for (uint32_t i = 0; i < v.size(); ++i, c = c.next_sibling()) {
    uint64_t t = 0;
    if (!c.AsUint(&t) || t > std::numeric_limits<uint32_t>::max()) {
      return Error(where.Element(i), "expected an integer in [0, 2^32)");
    }
    (*out)[i] = static_cast<uint32_t>(t);
  }
  return absl::OkStatus();
}

absl::Status ReadOptionalString(std::optional<Value> v, const Where& where,
                                std::optional<std::string>* out) {
  if (!v || v->is_null()) return absl::OkStatus();
  if (!v->is_string()) return Error(where, "expected a string or nil");
  *out = std::string(v->str());
  return absl::OkStatus();
}

absl::Status ReadOptionalInt(std::optional<Value> v, const Where& where,
                             std::optional<int64_t>* out) {
  if (!v || v->is_null()) return absl::OkStatus();
  int64_t x = 0;
  if (!v->AsInt(&x)) {
    return Error(where, v->is_integer() ? "integer out of range" : "expected an integer or nil");
  }
  *out = x;
  return absl::OkStatus();
}

// A digest of a value's structure, for extra keys that are neither strings nor integers.
void DigestValue(Value v, XXH3_state_t* st) {
  const auto kind = static_cast<uint8_t>(v.kind());
  XXH3_64bits_update(st, &kind, 1);
  if (v.is_string()) {
    const std::string_view s = v.str();
    const uint64_t n = s.size();
    XXH3_64bits_update(st, &n, sizeof n);
    XXH3_64bits_update(st, s.data(), s.size());
  } else if (v.is_binary()) {
    const auto b = v.bytes();
    const uint64_t n = b.size();
    XXH3_64bits_update(st, &n, sizeof n);
    XXH3_64bits_update(st, b.data(), b.size());
  } else if (v.is_array() || v.is_map()) {
    const uint64_t n = v.size();
    XXH3_64bits_update(st, &n, sizeof n);
    Value c = v.first_child();
    const uint64_t children = v.is_map() ? 2 * n : n;
    for (uint64_t i = 0; i < children; ++i, c = c.next_sibling()) DigestValue(c, st);
  } else if (v.is_number()) {
    int64_t i = 0;
    uint64_t u = 0;
    double d = 0;
    if (v.AsInt(&i)) {
      XXH3_64bits_update(st, &i, sizeof i);
    } else if (v.AsUint(&u)) {
      XXH3_64bits_update(st, &u, sizeof u);
    } else {
      d = v.AsDouble();
      XXH3_64bits_update(st, &d, sizeof d);
    }
  }
}

absl::Status ReadExtraKeys(std::optional<Value> v, const Where& where, size_t blocks,
                           std::optional<std::vector<BlockExtraKeys>>* out) {
  if (!v || v->is_null()) return absl::OkStatus();
  if (!v->is_array()) return Error(where, "expected an array (one entry per block) or nil");
  if (v->size() != blocks) {
    return Error(where, fmt::format("{} entries for {} blocks", v->size(), blocks));
  }
  out->emplace();
  (*out)->reserve(blocks);
  Value b = v->first_child();
  for (size_t i = 0; i < blocks; ++i, b = b.next_sibling()) {
    if (b.is_null()) {
      (*out)->emplace_back();
      continue;
    }
    if (!b.is_array()) return Error(where.Element(i), "expected an array of keys or nil");
    std::vector<ExtraKey> keys;
    keys.reserve(b.size());
    Value k = b.first_child();
    for (uint32_t j = 0; j < b.size(); ++j, k = k.next_sibling()) {
      ExtraKey key;
      uint64_t u = 0;
      if (k.is_string()) {
        key.str = std::string(k.str());
      } else if (k.is_integer() && (k.AsInt(&key.num) || k.AsUint(&u))) {
        key.kind = ExtraKey::Kind::kInt;
        if (u != 0) key.num = static_cast<int64_t>(u);
      } else {
        key.kind = ExtraKey::Kind::kOther;
        XXH3_state_t st;
        XXH3_INITSTATE(&st);
        XXH3_64bits_reset(&st);
        DigestValue(k, &st);
        key.num = static_cast<int64_t>(XXH3_64bits_digest(&st));
      }
      keys.push_back(std::move(key));
    }
    (*out)->emplace_back(std::move(keys));
  }
  return absl::OkStatus();
}

#define MYRIAD_RETURN_IF_ERROR(expr)        \
  do {                                      \
    if (absl::Status s_ = (expr); !s_.ok()) \
      return s_;                            \
  } while (0)

#define MYRIAD_CONCAT_INNER(a, b) a##b
#define MYRIAD_CONCAT(a, b) MYRIAD_CONCAT_INNER(a, b)
#define MYRIAD_ASSIGN_OR_RETURN(lhs, expr)               \
  auto MYRIAD_CONCAT(status_or_, __LINE__) = (expr);     \
  if (!MYRIAD_CONCAT(status_or_, __LINE__).ok())         \
    return MYRIAD_CONCAT(status_or_, __LINE__).status(); \
  lhs = std::move(*MYRIAD_CONCAT(status_or_, __LINE__))

absl::StatusOr<KvEvent> DecodeBlockStored(const Fields& f, const Where& w) {
  BlockStored e;
  Value v;
  MYRIAD_ASSIGN_OR_RETURN(v, f.Required(0, "block_hashes", w));
  MYRIAD_RETURN_IF_ERROR(ReadHashes(v, w.Field("block_hashes"), &e.block_hashes));
  MYRIAD_ASSIGN_OR_RETURN(v, f.Required(1, "parent_block_hash", w));
  if (!v.is_null()) {
    MYRIAD_ASSIGN_OR_RETURN(e.parent_block_hash, ReadHash(v, w.Field("parent_block_hash")));
  }
  MYRIAD_ASSIGN_OR_RETURN(v, f.Required(2, "token_ids", w));
  MYRIAD_RETURN_IF_ERROR(ReadTokens(v, w.Field("token_ids"), &e.token_ids));
  MYRIAD_ASSIGN_OR_RETURN(v, f.Required(3, "block_size", w));
  uint64_t block_size = 0;
  if (!v.AsUint(&block_size) || block_size == 0 ||
      block_size > static_cast<uint64_t>(std::numeric_limits<int32_t>::max())) {
    return Error(w.Field("block_size"), "expected a positive integer");
  }
  e.block_size = static_cast<uint32_t>(block_size);
  // 4: lora_id, deprecated and superseded by lora_name; not read. 5..: added over time, so
  // older releases omit them.
  MYRIAD_RETURN_IF_ERROR(ReadOptionalString(f.Get(5, "medium"), w.Field("medium"), &e.medium));
  MYRIAD_RETURN_IF_ERROR(
      ReadOptionalString(f.Get(6, "lora_name"), w.Field("lora_name"), &e.lora_name));
  MYRIAD_RETURN_IF_ERROR(ReadExtraKeys(f.Get(7, "extra_keys"), w.Field("extra_keys"),
                                       e.block_hashes.size(), &e.extra_keys));
  MYRIAD_RETURN_IF_ERROR(
      ReadOptionalInt(f.Get(8, "group_idx"), w.Field("group_idx"), &e.group_idx));
  return e;
}

absl::StatusOr<KvEvent> DecodeBlockRemoved(const Fields& f, const Where& w) {
  BlockRemoved e;
  Value v;
  MYRIAD_ASSIGN_OR_RETURN(v, f.Required(0, "block_hashes", w));
  MYRIAD_RETURN_IF_ERROR(ReadHashes(v, w.Field("block_hashes"), &e.block_hashes));
  MYRIAD_RETURN_IF_ERROR(ReadOptionalString(f.Get(1, "medium"), w.Field("medium"), &e.medium));
  MYRIAD_RETURN_IF_ERROR(
      ReadOptionalInt(f.Get(2, "group_idx"), w.Field("group_idx"), &e.group_idx));
  return e;
}

// Appends the event to batch->events, or counts it in unknown_events when its tag is new.
absl::Status DecodeEvent(Value j, const Where& w, KvEventBatch* batch) {
  std::string_view tag;
  size_t first = 0;
  if (j.is_array()) {
    if (j.size() == 0 || !j.first_child().is_string()) {
      return Error(w.Element(0), "expected the event's tag (a string)");
    }
    tag = j.first_child().str();
    first = 1;
  } else if (j.is_map()) {
    const auto type = Fields(j, 0).Get(0, "type");
    if (!type) return Error(w.Field("type"), "missing");
    if (!type->is_string()) return Error(w.Field("type"), "expected a string");
    tag = type->str();
  } else {
    return Error(w, "expected an array or a map");
  }
  const Fields fields(j, first);
  absl::StatusOr<KvEvent> event;
  if (tag == "BlockStored") {
    event = DecodeBlockStored(fields, w);
  } else if (tag == "BlockRemoved") {
    event = DecodeBlockRemoved(fields, w);
  } else if (tag == "AllBlocksCleared") {
    event = AllBlocksCleared{};
  } else {
    ++batch->unknown_events;
    return absl::OkStatus();
  }
  if (!event.ok()) return event.status();
  batch->events.push_back(std::move(*event));
  return absl::OkStatus();
}

absl::StatusOr<KvEventBatch> DecodeBatch(Value j) {
  const Where top;
  if (!j.is_array() && !j.is_map()) return Error(top.Field("batch"), "expected an array or a map");
  const Fields f(j, 0);
  KvEventBatch batch;
  Value v;
  MYRIAD_ASSIGN_OR_RETURN(v, f.Required(0, "ts", top));
  if (!v.is_number()) return Error(top.Field("ts"), "expected a number");
  batch.ts = v.AsDouble();
  MYRIAD_ASSIGN_OR_RETURN(v, f.Required(1, "events", top));
  if (!v.is_array()) return Error(top.Field("events"), "expected an array");
  batch.events.reserve(v.size());
  Value e = v.first_child();
  for (uint32_t i = 0; i < v.size(); ++i, e = e.next_sibling()) {
    MYRIAD_RETURN_IF_ERROR(DecodeEvent(e, Where{.event = i}, &batch));
  }
  std::optional<int64_t> rank;
  MYRIAD_RETURN_IF_ERROR(ReadOptionalInt(f.Get(2, "data_parallel_rank"),
                                         top.Field("data_parallel_rank"), &rank));
  if (rank) {
    if (*rank < 0 || *rank > std::numeric_limits<int>::max()) {
      return Error(top.Field("data_parallel_rank"), "out of range");
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
  thread_local MsgpackTape tape;
  absl::Status parsed = tape.Parse(payload, kMaxDepth);
  absl::StatusOr<KvEventBatch> batch =
      parsed.ok() ? DecodeBatch(tape.root()) : absl::StatusOr<KvEventBatch>(parsed);
  tape.Trim(kTapeKeepNodes);
  return batch;
}

}  // namespace myriad::net
