#pragma once
// A structural check of msgpack bytes that needs no recursion and allocates only its stack of
// open containers. nlohmann::json's msgpack reader recurses once per nesting level, so a
// payload of a million 0x91 bytes would overflow the thread's stack: payloads from the network
// go through this check before the parser.
#include <cstdint>
#include <span>

#include "absl/status/status.h"

namespace myriad::net {

// OK when `bytes` is exactly one well-formed msgpack value (no trailing bytes), nested at most
// `max_depth` containers deep, every length within the input.
absl::Status CheckMsgpack(std::span<const uint8_t> bytes, int max_depth);

}  // namespace myriad::net
