#pragma once
// The 8-byte big-endian sequence numbers of vLLM's KV-event frames, shared by the publisher and
// the subscriber. The replay terminator is -1 as a signed 8-byte integer, i.e. all ones.
#include <array>
#include <cstdint>
#include <span>

namespace myriad::net {

inline constexpr uint64_t kReplayEndSeq = ~uint64_t{0};

inline std::array<uint8_t, 8> EncodeSeq(uint64_t seq) {
  std::array<uint8_t, 8> out{};
  for (int i = 0; i < 8; ++i) out[i] = static_cast<uint8_t>(seq >> (56 - 8 * i));
  return out;
}

// Big-endian, of at most 8 bytes (vLLM reads start_seq with int.from_bytes, any length).
inline uint64_t DecodeSeq(std::span<const uint8_t> bytes) {
  uint64_t v = 0;
  for (uint8_t b : bytes) v = (v << 8) | b;
  return v;
}

}  // namespace myriad::net
