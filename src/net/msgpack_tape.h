#pragma once
// A msgpack document as a flat array of nodes (a "tape", in the manner of simdjson), filled by
// nlohmann::json's SAX parser. A DOM costs a heap object per value and its destruction; the
// tape costs two growing buffers that a caller can reuse from one document to the next. Values
// are read in place through Value, a cursor that is valid until the next Parse.
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"

namespace myriad::net {

class MsgpackTape {
 public:
  enum class Kind : uint8_t { kNull, kBool, kInt, kUint, kFloat, kString, kBinary, kArray, kMap };

  struct Node {
    Kind kind;
    uint32_t size;  // elements of an array, pairs of a map, bytes of a string or binary
    uint32_t end;   // arrays and maps: the index one past their last descendant
    uint64_t bits;  // the value: uint64, int64 or double bits, bool, or an offset into bytes_
  };

  class Value {
   public:
    Value() = default;  // refers to nothing: only for assigning to
    Value(const MsgpackTape* tape, uint32_t index) : tape_(tape), index_(index) {}

    Kind kind() const { return node().kind; }
    bool is_null() const { return kind() == Kind::kNull; }
    bool is_array() const { return kind() == Kind::kArray; }
    bool is_map() const { return kind() == Kind::kMap; }
    bool is_string() const { return kind() == Kind::kString; }
    bool is_binary() const { return kind() == Kind::kBinary; }
    bool is_integer() const { return kind() == Kind::kInt || kind() == Kind::kUint; }
    bool is_number() const { return is_integer() || kind() == Kind::kFloat; }
    uint32_t size() const { return node().size; }

    // False unless an integer in [0, 2^64).
    bool AsUint(uint64_t* out) const;
    // False unless an integer in [INT64_MIN, INT64_MAX].
    bool AsInt(int64_t* out) const;
    double AsDouble() const;  // numbers only
    std::string_view str() const;
    std::span<const uint8_t> bytes() const;

    // Children in order: an array's elements, a map's key, value, key, value...
    Value first_child() const { return {tape_, index_ + 1}; }
    Value next_sibling() const {
      const Node& n = node();
      return {tape_, (n.kind == Kind::kArray || n.kind == Kind::kMap) ? n.end : index_ + 1};
    }

   private:
    const Node& node() const { return tape_->nodes_[index_]; }
    const MsgpackTape* tape_ = nullptr;
    uint32_t index_ = 0;
  };

  // Checks the bytes (net/msgpack_scan.h, nesting at most `max_depth`), then fills the tape.
  absl::Status Parse(std::span<const uint8_t> bytes, int max_depth);
  Value root() const { return {this, 0}; }

  // Releases the buffers if they grew past `max_nodes`, so that one huge document does not pin
  // its memory for the life of a reused tape.
  void Trim(size_t max_nodes);

 private:
  friend class TapeBuilder;
  std::vector<Node> nodes_;
  std::string bytes_;  // strings and binaries, back to back
};

}  // namespace myriad::net
