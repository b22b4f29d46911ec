#include "core/time.h"

#include <cctype>
#include <chrono>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <ctime>

#include <fmt/format.h>

#include "core/steady_now.h"
#include "core/strings.h"

namespace myriad {

Nanos SteadyNow() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

absl::StatusOr<Nanos> ParseDuration(std::string_view text) {
  std::string_view s = StripWhitespace(text);
  if (s.empty()) return absl::InvalidArgumentError("empty duration");
  size_t unit_pos = s.size();
  while (unit_pos > 0 && std::isalpha(static_cast<unsigned char>(s[unit_pos - 1]))) --unit_pos;
  std::string_view number = s.substr(0, unit_pos);
  std::string_view unit = s.substr(unit_pos);
  double value = 0;
  auto [ptr, ec] = std::from_chars(number.data(), number.data() + number.size(), value);
  // from_chars reads "nan" and "inf" too; neither is a length of time.
  if (ec != std::errc() || ptr != number.data() + number.size() || number.empty() || !std::isfinite(value)) {
    return absl::InvalidArgumentError(
        fmt::format("'{}' is not a duration (expected e.g. 90s, 250ms, 1h)", text));
  }
  double scale;
  if (unit.empty() || unit == "s") scale = 1e9;
  else if (unit == "ms") scale = 1e6;
  else if (unit == "us") scale = 1e3;
  else if (unit == "ns") scale = 1;
  else if (unit == "m" || unit == "min") scale = 60e9;
  else if (unit == "h") scale = 3600e9;
  else return absl::InvalidArgumentError(fmt::format("unknown duration unit '{}' in '{}'", unit, text));
  if (value < 0) return absl::InvalidArgumentError(fmt::format("negative duration '{}'", text));
  double ns = value * scale;
  if (ns > 9.2e18) return absl::InvalidArgumentError(fmt::format("duration '{}' too large", text));
  return static_cast<Nanos>(std::llround(ns));
}

std::string FormatDuration(Nanos n) {
  char buf[64];
  double s = NanosToSeconds(n);
  if (n < kMillisecond) std::snprintf(buf, sizeof buf, "%.1fus", s * 1e6);
  else if (n < kSecond) std::snprintf(buf, sizeof buf, "%.2fms", s * 1e3);
  else if (n < kMinute) std::snprintf(buf, sizeof buf, "%.2fs", s);
  else if (n < kHour) std::snprintf(buf, sizeof buf, "%dm%04.1fs", static_cast<int>(s / 60), s - 60 * static_cast<int>(s / 60));
  else std::snprintf(buf, sizeof buf, "%dh%02dm", static_cast<int>(s / 3600), static_cast<int>(s / 60) % 60);
  return buf;
}

std::string FormatRfc3339Millis(int64_t unix_nanos) {
  // Floor division: an instant before the epoch still rounds toward the past.
  int64_t ms = unix_nanos / kMillisecond;
  if (unix_nanos % kMillisecond < 0) --ms;
  int64_t secs = ms / 1000;
  int64_t milli = ms % 1000;
  if (milli < 0) {
    milli += 1000;
    --secs;
  }
  const std::time_t t = static_cast<std::time_t>(secs);
  std::tm tm{};
  gmtime_r(&t, &tm);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                     tm.tm_hour, tm.tm_min, tm.tm_sec, milli);
}

}  // namespace myriad
