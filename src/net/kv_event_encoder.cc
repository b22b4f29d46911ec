// Encoding of vLLM's KV-event batches, byte for byte as msgspec writes them: a hand-written
// msgpack writer because nlohmann::json shortens floats that fit a float32, where msgspec always
// writes float64, and sorts map keys, where msgspec keeps declaration order.
#include <bit>
#include <cstdint>
#include <functional>
#include <string_view>
#include <variant>

#include "net/kv_events.h"

namespace myriad::net {
namespace {

class Writer {
 public:
  explicit Writer(std::vector<uint8_t>* out) : out_(*out) {}

  void Nil() { out_.push_back(0xc0); }

  void Uint(uint64_t v) {
    if (v <= 0x7f) {
      out_.push_back(static_cast<uint8_t>(v));
    } else if (v <= 0xff) {
      out_.push_back(0xcc);
      Be(v, 1);
    } else if (v <= 0xffff) {
      out_.push_back(0xcd);
      Be(v, 2);
    } else if (v <= 0xffffffff) {
      out_.push_back(0xce);
      Be(v, 4);
    } else {
      out_.push_back(0xcf);
      Be(v, 8);
    }
  }

  void Int(int64_t v) {
    if (v >= 0) return Uint(static_cast<uint64_t>(v));
    if (v >= -32) {
      out_.push_back(static_cast<uint8_t>(v));
    } else if (v >= -128) {
      out_.push_back(0xd0);
      Be(static_cast<uint64_t>(v), 1);
    } else if (v >= -32768) {
      out_.push_back(0xd1);
      Be(static_cast<uint64_t>(v), 2);
    } else if (v >= INT32_MIN) {
      out_.push_back(0xd2);
      Be(static_cast<uint64_t>(v), 4);
    } else {
      out_.push_back(0xd3);
      Be(static_cast<uint64_t>(v), 8);
    }
  }

  void Float64(double v) {
    out_.push_back(0xcb);
    Be(std::bit_cast<uint64_t>(v), 8);
  }

  void Str(std::string_view s) {
    Header(s.size(), 0xa0, 31, 0xd9, 0xda, 0xdb);
    out_.insert(out_.end(), s.begin(), s.end());
  }

  void Bin(std::span<const uint8_t> b) {
    // bin has no fix form: bin8 is the smallest.
    if (b.size() <= 0xff) {
      out_.push_back(0xc4);
      Be(b.size(), 1);
    } else if (b.size() <= 0xffff) {
      out_.push_back(0xc5);
      Be(b.size(), 2);
    } else {
      out_.push_back(0xc6);
      Be(b.size(), 4);
    }
    out_.insert(out_.end(), b.begin(), b.end());
  }

  void Array(size_t n) { Header(n, 0x90, 15, 0, 0xdc, 0xdd); }
  void Map(size_t n) { Header(n, 0x80, 15, 0, 0xde, 0xdf); }

 private:
  void Be(uint64_t v, int bytes) {
    for (int i = bytes - 1; i >= 0; --i) out_.push_back(static_cast<uint8_t>(v >> (8 * i)));
  }

  // The fix form up to fix_max, else the 8-bit (when the type has one), 16- or 32-bit length.
  void Header(size_t n, uint8_t fix, size_t fix_max, uint8_t c8, uint8_t c16, uint8_t c32) {
    if (n <= fix_max) {
      out_.push_back(static_cast<uint8_t>(fix | n));
    } else if (c8 != 0 && n <= 0xff) {
      out_.push_back(c8);
      Be(n, 1);
    } else if (n <= 0xffff) {
      out_.push_back(c16);
      Be(n, 2);
    } else {
      out_.push_back(c32);
      Be(n, 4);
    }
  }

  std::vector<uint8_t>& out_;
};

// Writes one struct in array or map form. Fields are added in declaration order; a field equal
// to its default (`omittable`) is left out (map form) or, in array form, left out only when no
// later field is written, since positions must hold.
class StructWriter {
 public:
  StructWriter(Writer* w, bool as_map) : w_(*w), as_map_(as_map) {}

  template <typename F>
  void Field(const char* name, bool omittable, F write) {
    fields_.push_back({name, omittable, std::function<void()>(write)});
  }

  void Finish(const char* tag) {
    size_t n = fields_.size();
    if (as_map_) {
      size_t kept = 0;
      for (const auto& f : fields_) kept += f.omittable ? 0 : 1;
      w_.Map(kept + (tag ? 1 : 0));
      if (tag) {
        w_.Str("type");
        w_.Str(tag);
      }
      for (const auto& f : fields_) {
        if (f.omittable) continue;
        w_.Str(f.name);
        f.write();
      }
      return;
    }
    while (n > 0 && fields_[n - 1].omittable) --n;
    w_.Array(n + (tag ? 1 : 0));
    if (tag) w_.Str(tag);
    for (size_t i = 0; i < n; ++i) fields_[i].write();
  }

 private:
  struct Pending {
    const char* name;
    bool omittable;
    std::function<void()> write;
  };
  Writer& w_;
  bool as_map_;
  std::vector<Pending> fields_;
};

class BatchEncoder {
 public:
  BatchEncoder(std::vector<uint8_t>* out, KvEventEncoding encoding, KvHashEncoding hashes)
      : w_(out), encoding_(encoding), hashes_(hashes) {}

  void Batch(const KvEventBatch& b) {
    StructWriter s(&w_, encoding_ == KvEventEncoding::kMap);
    s.Field("ts", false, [&] { w_.Float64(b.ts); });
    s.Field("events", false, [&] {
      w_.Array(b.events.size());
      for (const KvEvent& e : b.events) std::visit([&](const auto& ev) { Event(ev); }, e);
    });
    s.Field("data_parallel_rank", !b.dp_rank.has_value(), [&] { w_.Int(*b.dp_rank); });
    s.Finish(nullptr);
  }

 private:
  bool EventsAsMaps() const { return encoding_ != KvEventEncoding::kArray; }

  void Hash(EngineBlockHash h) {
    if (hashes_ == KvHashEncoding::kInt) return w_.Uint(h);
    uint8_t bytes[8];
    for (int i = 0; i < 8; ++i) bytes[i] = static_cast<uint8_t>(h >> (56 - 8 * i));
    w_.Bin(bytes);
  }

  void Hashes(const std::vector<EngineBlockHash>& hs) {
    w_.Array(hs.size());
    for (EngineBlockHash h : hs) Hash(h);
  }

  void OptionalString(const std::optional<std::string>& s) {
    if (s) {
      w_.Str(*s);
    } else {
      w_.Nil();
    }
  }

  void Event(const BlockStored& e) {
    StructWriter s(&w_, EventsAsMaps());
    s.Field("block_hashes", false, [&] { Hashes(e.block_hashes); });
    s.Field("parent_block_hash", false, [&] {
      if (e.parent_block_hash) {
        Hash(*e.parent_block_hash);
      } else {
        w_.Nil();
      }
    });
    s.Field("token_ids", false, [&] {
      w_.Array(e.token_ids.size());
      for (uint32_t t : e.token_ids) w_.Uint(t);
    });
    s.Field("block_size", false, [&] { w_.Uint(e.block_size); });
    s.Field("lora_id", false, [&] { w_.Nil(); });
    s.Field("medium", false, [&] { OptionalString(e.medium); });
    s.Field("lora_name", false, [&] { OptionalString(e.lora_name); });
    s.Field("extra_keys", !e.extra_keys.has_value(), [&] {
      if (!e.extra_keys) return w_.Nil();  // an array before a group_idx
      w_.Array(e.extra_keys->size());
      for (const BlockExtraKeys& keys : *e.extra_keys) {
        if (!keys) {
          w_.Nil();
          continue;
        }
        w_.Array(keys->size());
        for (const ExtraKey& k : *keys) {
          if (k.kind == ExtraKey::Kind::kString) {
            w_.Str(k.str);
          } else {
            w_.Int(k.num);  // kOther: only its digest is known
          }
        }
      }
    });
    s.Field("group_idx", !e.group_idx.has_value(), [&] { w_.Int(*e.group_idx); });
    s.Finish("BlockStored");
  }

  void Event(const BlockRemoved& e) {
    StructWriter s(&w_, EventsAsMaps());
    s.Field("block_hashes", false, [&] { Hashes(e.block_hashes); });
    s.Field("medium", false, [&] { OptionalString(e.medium); });
    s.Field("group_idx", !e.group_idx.has_value(), [&] { w_.Int(*e.group_idx); });
    s.Finish("BlockRemoved");
  }

  void Event(const AllBlocksCleared&) {
    StructWriter s(&w_, EventsAsMaps());
    s.Finish("AllBlocksCleared");
  }

  Writer w_;
  KvEventEncoding encoding_;
  KvHashEncoding hashes_;
};

}  // namespace

std::vector<uint8_t> EncodeKvEventBatch(const KvEventBatch& batch, KvEventEncoding encoding,
                                        KvHashEncoding hashes) {
  std::vector<uint8_t> out;
  out.reserve(64 + batch.events.size() * 32);
  BatchEncoder(&out, encoding, hashes).Batch(batch);
  return out;
}

}  // namespace myriad::net
