#pragma once
// Virtual and real durations are integer nanoseconds everywhere in Myriad.
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace myriad {

using Nanos = int64_t;

inline constexpr Nanos kMicrosecond = 1'000;
inline constexpr Nanos kMillisecond = 1'000'000;
inline constexpr Nanos kSecond = 1'000'000'000;
inline constexpr Nanos kMinute = 60 * kSecond;
inline constexpr Nanos kHour = 60 * kMinute;
inline constexpr Nanos kNanosInfinite = INT64_MAX;

inline Nanos SecondsToNanos(double s) { return static_cast<Nanos>(std::llround(s * 1e9)); }
// Division, not multiplication by 1e-9: whole seconds come out exact (120 s, not 120.00000000000001).
inline double NanosToSeconds(Nanos n) { return static_cast<double>(n) / 1e9; }

// Parses "1h", "90m", "30s", "250ms", "10us", "5ns" or a bare number of seconds ("2.5").
absl::StatusOr<Nanos> ParseDuration(std::string_view text);

// "1h02m03.5s"-style rendering for humans.
std::string FormatDuration(Nanos n);

// A wall-clock instant (nanoseconds since the Unix epoch) as RFC 3339 in UTC with milliseconds,
// "2026-12-01T22:04:23.123Z": what log shippers parse without a format hint.
std::string FormatRfc3339Millis(int64_t unix_nanos);

}  // namespace myriad
