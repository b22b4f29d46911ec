#include "net/msgpack_scan.h"

#include <vector>

#include <fmt/format.h>

namespace myriad::net {
namespace {

absl::Status Malformed(size_t pos, std::string_view what) {
  return absl::InvalidArgumentError(fmt::format("msgpack: {} at byte {}", what, pos));
}

}  // namespace

absl::Status CheckMsgpack(std::span<const uint8_t> bytes, int max_depth) {
  size_t pos = 0;
  // Reads an n-byte big-endian length; false when the input ends first.
  auto read_len = [&](int n, uint64_t* out) {
    if (bytes.size() - pos < static_cast<size_t>(n)) return false;
    uint64_t v = 0;
    for (int i = 0; i < n; ++i) v = (v << 8) | bytes[pos++];
    *out = v;
    return true;
  };
  std::vector<uint64_t> pending{1};  // values still to read in each open container
  while (!pending.empty()) {
    if (pending.back() == 0) {
      pending.pop_back();
      continue;
    }
    --pending.back();
    if (pos >= bytes.size()) return Malformed(pos, "truncated input");
    const size_t at = pos;
    const uint8_t c = bytes[pos++];
    uint64_t skip = 0;      // payload bytes after the header
    uint64_t children = 0;  // values inside, for arrays and maps
    uint64_t len = 0;
    bool ok = true;
    if (c <= 0x7f || c >= 0xe0) {
      // fixint
    } else if (c <= 0x8f) {
      children = uint64_t{c & 0x0fu} * 2;
    } else if (c <= 0x9f) {
      children = c & 0x0fu;
    } else if (c <= 0xbf) {
      skip = c & 0x1fu;
    } else {
      switch (c) {
        case 0xc0: case 0xc2: case 0xc3: break;                       // nil, false, true
        case 0xc4: case 0xd9: ok = read_len(1, &len); skip = len; break;  // bin8, str8
        case 0xc5: case 0xda: ok = read_len(2, &len); skip = len; break;
        case 0xc6: case 0xdb: ok = read_len(4, &len); skip = len; break;
        case 0xc7: ok = read_len(1, &len); skip = len + 1; break;  // ext8: length, type, data
        case 0xc8: ok = read_len(2, &len); skip = len + 1; break;
        case 0xc9: ok = read_len(4, &len); skip = len + 1; break;
        case 0xca: skip = 4; break;  // float32
        case 0xcb: skip = 8; break;  // float64
        case 0xcc: case 0xd0: skip = 1; break;
        case 0xcd: case 0xd1: skip = 2; break;
        case 0xce: case 0xd2: skip = 4; break;
        case 0xcf: case 0xd3: skip = 8; break;
        case 0xd4: skip = 2; break;  // fixext: type byte + 1, 2, 4, 8, 16 data bytes
        case 0xd5: skip = 3; break;
        case 0xd6: skip = 5; break;
        case 0xd7: skip = 9; break;
        case 0xd8: skip = 17; break;
        case 0xdc: ok = read_len(2, &children); break;  // array16
        case 0xdd: ok = read_len(4, &children); break;
        case 0xde: ok = read_len(2, &children); children *= 2; break;  // map16: key + value
        case 0xdf: ok = read_len(4, &children); children *= 2; break;
        default: return Malformed(at, "invalid type byte 0xc1");
      }
    }
    if (!ok) return Malformed(at, "truncated length");
    if (skip > bytes.size() - pos) return Malformed(at, "truncated value");
    pos += skip;
    if (children > 0) {
      // Every value takes at least one byte: a count beyond the rest of the input is a lie, and
      // refusing it here bounds the parser's work by the input's size.
      if (children > bytes.size() - pos) return Malformed(at, "container longer than the input");
      if (static_cast<int>(pending.size()) > max_depth) {
        return Malformed(at, fmt::format("nesting deeper than {}", max_depth));
      }
      pending.push_back(children);
    }
  }
  if (pos != bytes.size()) return Malformed(pos, "trailing bytes after the value");
  return absl::OkStatus();
}

}  // namespace myriad::net
