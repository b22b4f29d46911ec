#include "net/msgpack_tape.h"

#include <bit>
#include <limits>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "net/msgpack_scan.h"

namespace myriad::net {

using Kind = MsgpackTape::Kind;

// nlohmann::json's SAX interface, appending nodes.
class TapeBuilder {
 public:
  using json = nlohmann::json;
  explicit TapeBuilder(MsgpackTape* tape) : tape_(*tape) {}

  bool null() { return Push(Kind::kNull, 0, 0); }
  bool boolean(bool v) { return Push(Kind::kBool, 0, v ? 1 : 0); }
  bool number_integer(json::number_integer_t v) {
    return Push(Kind::kInt, 0, static_cast<uint64_t>(v));
  }
  bool number_unsigned(json::number_unsigned_t v) { return Push(Kind::kUint, 0, v); }
  bool number_float(json::number_float_t v, const json::string_t&) {
    return Push(Kind::kFloat, 0, std::bit_cast<uint64_t>(v));
  }
  bool string(json::string_t& s) { return Bytes(Kind::kString, s.data(), s.size()); }
  bool key(json::string_t& s) { return Bytes(Kind::kString, s.data(), s.size()); }
  bool binary(json::binary_t& b) {
    return Bytes(Kind::kBinary, reinterpret_cast<const char*>(b.data()), b.size());
  }
  bool start_array(std::size_t n) { return Open(Kind::kArray, n); }
  bool start_object(std::size_t n) { return Open(Kind::kMap, n); }
  bool end_array() { return Close(); }
  bool end_object() { return Close(); }
  bool parse_error(std::size_t, const std::string& what, const nlohmann::detail::exception&) {
    error_ = what;
    return false;
  }

  const std::string& error() const { return error_; }

 private:
  bool Push(Kind kind, uint32_t size, uint64_t bits) {
    tape_.nodes_.push_back({kind, size, 0, bits});
    return true;
  }
  bool Bytes(Kind kind, const char* data, size_t n) {
    const uint64_t offset = tape_.bytes_.size();
    tape_.bytes_.append(data, n);
    return Push(kind, static_cast<uint32_t>(n), offset);
  }
  bool Open(Kind kind, size_t n) {
    open_.push_back(static_cast<uint32_t>(tape_.nodes_.size()));
    return Push(kind, static_cast<uint32_t>(n), 0);
  }
  bool Close() {
    tape_.nodes_[open_.back()].end = static_cast<uint32_t>(tape_.nodes_.size());
    open_.pop_back();
    return true;
  }

  MsgpackTape& tape_;
  std::vector<uint32_t> open_;
  std::string error_;
};

absl::Status MsgpackTape::Parse(std::span<const uint8_t> bytes, int max_depth) {
  nodes_.clear();
  bytes_.clear();
  // Lengths and counts fit 32 bits in msgpack, and the nodes are fewer than the input's bytes.
  if (bytes.size() > std::numeric_limits<uint32_t>::max()) {
    return absl::InvalidArgumentError("msgpack: document over 4 GiB");
  }
  if (absl::Status s = CheckMsgpack(bytes, max_depth); !s.ok()) return s;
  TapeBuilder builder(this);
  bool ok = false;
  try {
    ok = nlohmann::json::sax_parse(bytes.begin(), bytes.end(), &builder,
                                   nlohmann::json::input_format_t::msgpack, /*strict=*/true);
  } catch (const nlohmann::json::exception& e) {  // not expected after the check
    return absl::InvalidArgumentError(fmt::format("msgpack: {}", e.what()));
  }
  if (!ok) return absl::InvalidArgumentError(fmt::format("msgpack: {}", builder.error()));
  return absl::OkStatus();
}

void MsgpackTape::Trim(size_t max_nodes) {
  if (nodes_.capacity() > max_nodes) {
    std::vector<Node>().swap(nodes_);
    std::string().swap(bytes_);
  }
}

bool MsgpackTape::Value::AsUint(uint64_t* out) const {
  const Node& n = node();
  if (n.kind == Kind::kUint || (n.kind == Kind::kInt && static_cast<int64_t>(n.bits) >= 0)) {
    *out = n.bits;
    return true;
  }
  return false;
}

bool MsgpackTape::Value::AsInt(int64_t* out) const {
  const Node& n = node();
  if (n.kind == Kind::kInt ||
      (n.kind == Kind::kUint && n.bits <= static_cast<uint64_t>(INT64_MAX))) {
    *out = static_cast<int64_t>(n.bits);
    return true;
  }
  return false;
}

double MsgpackTape::Value::AsDouble() const {
  const Node& n = node();
  switch (n.kind) {
    case Kind::kFloat: return std::bit_cast<double>(n.bits);
    case Kind::kInt: return static_cast<double>(static_cast<int64_t>(n.bits));
    case Kind::kUint: return static_cast<double>(n.bits);
    default: return 0;
  }
}

std::string_view MsgpackTape::Value::str() const {
  const Node& n = node();
  return std::string_view(tape_->bytes_).substr(n.bits, n.size);
}

std::span<const uint8_t> MsgpackTape::Value::bytes() const {
  const Node& n = node();
  return {reinterpret_cast<const uint8_t*>(tape_->bytes_.data()) + n.bits, n.size};
}

}  // namespace myriad::net
