#include "sim/trace_workload.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <fstream>
#include <optional>
#include <utility>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "core/block_hash.h"
#include "core/rng.h"
#include "core/strings.h"

namespace myriad::sim {
namespace {

// Ids of blocks that belong to one request only. Bit 63 keeps them apart from trace ids (which
// count up from 0); index < 2^20 records and block < 2^15 (2^24 tokens / 512) fit below it.
uint64_t UniqueBlockId(uint64_t index, size_t block) {
  return (uint64_t{1} << 63) | (index << 16) | static_cast<uint64_t>(block);
}

uint32_t TokenOf(uint64_t block_id, int position) {
  // Two rounds so that neighbouring block ids do not give shifted copies of one sequence.
  const uint64_t h = Mix64(Mix64(block_id) + static_cast<uint64_t>(position));
  return static_cast<uint32_t>(h % kReplayVocab);
}

using nlohmann::json;

absl::Status LineError(std::string_view source, int64_t line, std::string_view field,
                       std::string_view what) {
  return absl::InvalidArgumentError(fmt::format("{}:{}: {}: {}", source, line, field, what));
}

// A required integer field of a Mooncake line, at least `min`.
absl::StatusOr<int32_t> ReadCount(const json& obj, const char* field, int32_t min,
                                  std::string_view source, int64_t line) {
  auto it = obj.find(field);
  if (it == obj.end()) return LineError(source, line, field, "missing");
  if (!it->is_number_integer()) {
    return LineError(source, line, field, fmt::format("must be an integer, got {}", it->dump()));
  }
  if (it->is_number_unsigned() ? it->get<uint64_t>() > kMaxTokens : it->get<int64_t>() > kMaxTokens) {
    return LineError(source, line, field, fmt::format("must be at most {}, got {}", kMaxTokens, it->dump()));
  }
  const int64_t value = it->get<int64_t>();
  if (value < min) {
    return LineError(source, line, field, fmt::format("must be >= {}, got {}", min, value));
  }
  return static_cast<int32_t>(value);
}

// Trace times are offsets from the first request, so an hour-long trace that started at
// 18:17 replays from t = 0.
void MakeRelative(std::vector<TraceRecord>& records) {
  if (records.empty()) return;
  const Nanos first = records.front().offset;
  for (auto& r : records) r.offset -= first;
}

std::optional<int64_t> ParseInt(std::string_view s) {
  int64_t value = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (ec != std::errc() || ptr != s.data() + s.size() || s.empty()) return std::nullopt;
  return value;
}

// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's days_from_civil).
int64_t DaysFromCivil(int64_t y, int64_t m, int64_t d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const int64_t yoe = y - era * 400;
  const int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

// "YYYY-MM-DD HH:MM:SS[.fraction]" (or 'T' between date and time) as ns since the epoch.
std::optional<Nanos> ParseCivilTime(std::string_view s) {
  if (s.size() < 19 || s[4] != '-' || s[7] != '-' || (s[10] != ' ' && s[10] != 'T') ||
      s[13] != ':' || s[16] != ':') {
    return std::nullopt;
  }
  auto field = [&](size_t pos, size_t len) { return ParseInt(s.substr(pos, len)); };
  auto year = field(0, 4), month = field(5, 2), day = field(8, 2);
  auto hour = field(11, 2), minute = field(14, 2), second = field(17, 2);
  if (!year || !month || !day || !hour || !minute || !second) return std::nullopt;
  static constexpr int kDaysIn[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  const bool leap = (*year % 4 == 0 && *year % 100 != 0) || *year % 400 == 0;
  if (*year < 1900 || *year > 2200 || *month < 1 || *month > 12 || *day < 1 ||
      *day > kDaysIn[*month - 1] - (*month == 2 && !leap) || *hour > 23 || *minute > 59 ||
      *second > 60) {
    return std::nullopt;
  }
  Nanos fraction = 0;
  if (s.size() > 19) {
    if (s[19] != '.' || s.size() == 20) return std::nullopt;
    Nanos scale = 100'000'000;
    for (char c : s.substr(20)) {
      if (c < '0' || c > '9') return std::nullopt;
      fraction += (c - '0') * scale;  // digits past the ninth add nothing
      scale /= 10;
    }
  }
  const int64_t days = DaysFromCivil(*year, *month, *day);
  return ((days * 24 + *hour) * 60 + *minute) * 60 * kSecond + *second * kSecond + fraction;
}

std::vector<std::string_view> SplitCsv(std::string_view line) {
  std::vector<std::string_view> cells;
  size_t start = 0;
  for (;;) {
    size_t comma = line.find(',', start);
    cells.push_back(StripWhitespace(line.substr(start, comma - start)));
    if (comma == std::string_view::npos) return cells;
    start = comma + 1;
  }
}

// Content ids of requests without prefix information: tagged so they can't equal a Mooncake
// id, and unique per record so the first block (and hence the whole chain) is unique.
constexpr uint64_t kUniqueContentTag = uint64_t{1} << 57;

class TraceWorkload final : public Workload {
 public:
  TraceWorkload(std::vector<TraceRecord> records, TraceReplayOptions options, Nanos period,
                std::vector<Nanos> jitters)
      : records_(std::move(records)),
        options_(options),
        period_(period),
        jitters_(std::move(jitters)),
        sub_blocks_(kTraceBlockTokens / options.block_tokens) {
    for (int k = 0; k < options_.replicas; ++k) {
      Cursor c{0, k, 0, 0};
      if (Settle(c)) Push(c);
    }
  }

  std::optional<Request> Next() override {
    if (heap_.empty()) return std::nullopt;
    std::pop_heap(heap_.begin(), heap_.end(), Later);
    Cursor c = heap_.back();
    heap_.pop_back();
    Request req = Build(c);
    ++c.index;
    if (Settle(c)) Push(c);
    return req;
  }

 private:
  // Position of one replica in the (possibly looped) trace.
  struct Cursor {
    Nanos arrival;
    int replica;
    int64_t loop;
    size_t index;
  };
  static bool Later(const Cursor& a, const Cursor& b) {
    return a.arrival != b.arrival ? a.arrival > b.arrival : a.replica > b.replica;
  }

  void Push(const Cursor& c) {
    heap_.push_back(c);
    std::push_heap(heap_.begin(), heap_.end(), Later);
  }

  // Wraps the cursor into the next loop if needed and computes its arrival; false when the
  // replica is exhausted.
  bool Settle(Cursor& c) const {
    if (c.index >= records_.size()) {
      if (!options_.loop || records_.empty()) return false;
      c.index = 0;
      ++c.loop;
    }
    const double unscaled = static_cast<double>(records_[c.index].offset) +
                            static_cast<double>(c.loop) * static_cast<double>(period_);
    c.arrival = static_cast<Nanos>(std::llround(unscaled / options_.rate_scale)) +
                jitters_[c.replica];
    return options_.duration <= 0 || c.arrival < options_.duration;
  }

  Request Build(const Cursor& c) {
    const TraceRecord& rec = records_[c.index];
    Request req;
    req.id = next_id_++;
    req.arrival = c.arrival;
    req.input_tokens = rec.input_tokens;
    req.output_tokens = rec.output_tokens;
    req.tenant = rec.tenant;
    // Each (replica, loop) pair is its own prefix space: copies keep their internal sharing
    // but share nothing with each other.
    const uint64_t extra = static_cast<uint64_t>(c.loop) * options_.replicas + c.replica;
    if (options_.token_keys) {
      const std::vector<BlockKey> keys =
          HashTokenBlocks(TracePromptIds(rec, c.index), static_cast<size_t>(options_.block_tokens));
      req.blocks.assign(keys.begin(), keys.end());
      return req;
    }
    size_t n_keys = static_cast<size_t>(rec.input_tokens / options_.block_tokens);
    if (!rec.content_ids.empty()) {
      n_keys = std::min(n_keys, rec.content_ids.size() * sub_blocks_);
    }
    req.blocks.resize(n_keys);
    BlockKey parent = kRootBlockKey;
    for (size_t i = 0; i < n_keys; ++i) {
      const size_t trace_block = i / sub_blocks_;
      const uint64_t content =
          rec.content_ids.empty()
              ? kUniqueContentTag | (static_cast<uint64_t>(c.index) << 22) | trace_block
              : rec.content_ids[trace_block];
      parent = HashContentBlock(parent, content * 64 + i % sub_blocks_, extra);
      req.blocks[i] = parent;
    }
    return req;
  }

  const std::vector<TraceRecord> records_;
  const TraceReplayOptions options_;
  const Nanos period_;                // unscaled length of one pass, for looping
  const std::vector<Nanos> jitters_;  // per replica, already scaled
  const size_t sub_blocks_;           // sim blocks per 512-token trace block
  std::vector<Cursor> heap_;
  uint64_t next_id_ = 0;
};

}  // namespace

absl::StatusOr<std::vector<TraceRecord>> ParseMooncakeTrace(std::istream& in,
                                                            std::string_view source_name) {
  std::vector<TraceRecord> records;
  std::string line;
  int64_t line_no = 0;
  Nanos previous = 0;
  while (std::getline(in, line)) {
    ++line_no;
    std::string_view text = StripWhitespace(line);
    if (text.empty()) continue;
    json obj;
    try {
      obj = json::parse(text);
    } catch (const json::parse_error& e) {
      return LineError(source_name, line_no, "json", e.what());
    }
    if (!obj.is_object()) return LineError(source_name, line_no, "json", "not an object");

    TraceRecord rec;
    auto ts = obj.find("timestamp");
    if (ts == obj.end()) return LineError(source_name, line_no, "timestamp", "missing");
    if (!ts->is_number()) {
      return LineError(source_name, line_no, "timestamp",
                       fmt::format("must be a number of ms, got {}", ts->dump()));
    }
    const double ms = ts->get<double>();
    if (!std::isfinite(ms) || ms < 0 || ms > 9e12) {
      return LineError(source_name, line_no, "timestamp", fmt::format("{} out of range", ms));
    }
    rec.offset = ts->is_number_integer() ? ts->get<int64_t>() * kMillisecond
                                         : static_cast<Nanos>(std::llround(ms * 1e6));
    if (!records.empty() && rec.offset < previous) {
      return LineError(source_name, line_no, "timestamp",
                       fmt::format("goes backwards ({} ms after {} ms)", ms,
                                   static_cast<double>(previous) / 1e6));
    }
    previous = rec.offset;

    auto input = ReadCount(obj, "input_length", 1, source_name, line_no);
    if (!input.ok()) return input.status();
    rec.input_tokens = *input;
    // Every request produces at least one token, so a 0 is a broken record, not a short reply.
    auto output = ReadCount(obj, "output_length", 1, source_name, line_no);
    if (!output.ok()) return output.status();
    rec.output_tokens = *output;

    auto ids = obj.find("hash_ids");
    if (ids == obj.end()) return LineError(source_name, line_no, "hash_ids", "missing");
    if (!ids->is_array()) {
      return LineError(source_name, line_no, "hash_ids",
                       fmt::format("must be an array, got {}", ids->dump()));
    }
    rec.content_ids.reserve(ids->size());
    for (size_t i = 0; i < ids->size(); ++i) {
      const json& id = (*ids)[i];
      if (!id.is_number_unsigned()) {
        return LineError(source_name, line_no, "hash_ids",
                         fmt::format("element {} must be a non-negative integer, got {}", i,
                                     id.dump()));
      }
      rec.content_ids.push_back(id.get<uint64_t>());
    }
    if (auto t = obj.find("tenant"); t != obj.end()) {
      if (!t->is_number_unsigned() || t->get<uint64_t>() >= kMaxTraceTenants) {
        return LineError(source_name, line_no, "tenant",
                         fmt::format("must be an integer in [0, {}), got {}", kMaxTraceTenants, t->dump()));
      }
      rec.tenant = static_cast<uint32_t>(t->get<uint64_t>());
    }
    records.push_back(std::move(rec));
  }
  if (in.bad()) return absl::DataLossError(fmt::format("{}: read error", source_name));
  MakeRelative(records);
  return records;
}

absl::StatusOr<std::vector<TraceRecord>> ParseAzureTrace(std::istream& in,
                                                         std::string_view source_name) {
  static constexpr const char* kColumns[] = {"TIMESTAMP", "ContextTokens", "GeneratedTokens"};
  std::string line;
  int64_t line_no = 0;
  std::string header_line;
  while (header_line.empty() && std::getline(in, line)) {
    ++line_no;
    std::string_view text = StripWhitespace(line);
    if (text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);  // Excel's BOM
    header_line = std::string(text);
  }
  if (header_line.empty()) return LineError(source_name, line_no, "header", "missing");
  const std::vector<std::string_view> header = SplitCsv(header_line);
  size_t col[3];
  for (int c = 0; c < 3; ++c) {
    auto it = std::find_if(header.begin(), header.end(),
                           [&](std::string_view h) { return EqualsIgnoreCase(h, kColumns[c]); });
    if (it == header.end()) {
      return LineError(source_name, line_no, "header",
                       fmt::format("no column named {}", kColumns[c]));
    }
    col[c] = static_cast<size_t>(it - header.begin());
  }

  std::vector<TraceRecord> records;
  Nanos previous = 0;
  while (std::getline(in, line)) {
    ++line_no;
    std::string_view text = StripWhitespace(line);
    if (text.empty()) continue;
    std::vector<std::string_view> cells = SplitCsv(text);
    if (cells.size() != header.size()) {
      return LineError(source_name, line_no, "row",
                       fmt::format("expected {} columns, got {}", header.size(), cells.size()));
    }
    auto column_name = [&](int c) {
      return fmt::format("column {} ({})", col[c] + 1, kColumns[c]);
    };
    TraceRecord rec;
    std::optional<Nanos> at = ParseCivilTime(cells[col[0]]);
    if (!at) {
      return LineError(source_name, line_no, column_name(0),
                       fmt::format("'{}' is not a time (expected YYYY-MM-DD HH:MM:SS.fraction)",
                                   cells[col[0]]));
    }
    if (!records.empty() && *at < previous) {
      return LineError(source_name, line_no, column_name(0), "goes backwards");
    }
    previous = rec.offset = *at;
    int32_t* counts[] = {&rec.input_tokens, &rec.output_tokens};
    for (int c = 1; c < 3; ++c) {
      std::optional<int64_t> v = ParseInt(cells[col[c]]);
      if (!v || *v < 1 || *v > kMaxTokens) {
        return LineError(source_name, line_no, column_name(c),
                         fmt::format("must be an integer between 1 and {}, got '{}'", kMaxTokens, cells[col[c]]));
      }
      *counts[c - 1] = static_cast<int32_t>(*v);
    }
    records.push_back(std::move(rec));
  }
  if (in.bad()) return absl::DataLossError(fmt::format("{}: read error", source_name));
  MakeRelative(records);
  return records;
}

absl::StatusOr<std::vector<TraceRecord>> LoadTraceFile(const std::string& path,
                                                       std::string_view format) {
  const bool mooncake = EqualsIgnoreCase(format, "mooncake");
  if (!mooncake && !EqualsIgnoreCase(format, "azure")) {
    return absl::InvalidArgumentError(
        fmt::format("unknown trace format '{}' (expected mooncake or azure)", format));
  }
  std::ifstream in(path);
  if (!in.is_open()) {
    return absl::NotFoundError(fmt::format("cannot open trace {}: {}", path, std::strerror(errno)));
  }
  auto records = mooncake ? ParseMooncakeTrace(in, path) : ParseAzureTrace(in, path);
  // Replaying nothing would report a run of zero requests as if it had succeeded.
  if (records.ok() && records->empty()) {
    return absl::InvalidArgumentError(fmt::format("{}: the trace has no requests", path));
  }
  return records;
}

std::vector<uint32_t> TracePromptIds(const TraceRecord& record, uint64_t index) {
  const int64_t n = std::max<int32_t>(record.input_tokens, 1);
  std::vector<uint32_t> ids;
  ids.reserve(static_cast<size_t>(n));
  for (size_t block = 0; static_cast<int64_t>(ids.size()) < n; ++block) {
    const uint64_t id = block < record.content_ids.size() ? record.content_ids[block] : UniqueBlockId(index, block);
    for (int p = 0; p < kTraceBlockTokens && static_cast<int64_t>(ids.size()) < n; ++p) {
      ids.push_back(TokenOf(id, p));
    }
  }
  return ids;
}

std::optional<FieldError> CheckTraceOptions(const TraceReplayOptions& o) {
  if (!(o.rate_scale > 0) || !std::isfinite(o.rate_scale)) {
    return FieldError{"workload.rate_scale", fmt::format("must be > 0, got {}", o.rate_scale)};
  }
  if (o.replicas < 1 || o.replicas > kMaxTraceReplicas) {
    return FieldError{"workload.replicas",
                      fmt::format("must be between 1 and {}, got {}", kMaxTraceReplicas, o.replicas)};
  }
  // Sub-block j of trace block c is keyed by c * 64 + j, so at most 64 sub-blocks (>= 8 tokens).
  if (o.block_tokens < 8 || kTraceBlockTokens % o.block_tokens != 0) {
    return FieldError{"kv_block_tokens",
                      fmt::format("must divide {} and be >= 8 to replay a trace, got {}", kTraceBlockTokens, o.block_tokens)};
  }
  if (o.duration < 0) return FieldError{"duration", fmt::format("must be >= 0, got {}", FormatDuration(o.duration))};
  if (o.loop && o.duration <= 0) return FieldError{"workload.loop", "needs a positive duration"};
  if (o.token_keys && (o.replicas != 1 || o.loop)) {
    return FieldError{"workload.keys", "'tokens' replays the trace once: it takes neither replicas nor loop"};
  }
  return std::nullopt;
}

absl::StatusOr<std::unique_ptr<Workload>> MakeTraceWorkload(std::vector<TraceRecord> records,
                                                            TraceReplayOptions options) {
  auto invalid = [](std::string msg) { return absl::InvalidArgumentError(std::move(msg)); };
  if (auto e = CheckTraceOptions(options)) return invalid(fmt::format("{}: {}", e->field, e->what));
  for (size_t i = 1; i < records.size(); ++i) {
    if (records[i].offset < records[i - 1].offset) {
      return invalid(fmt::format("records: offset of record {} goes backwards", i));
    }
  }
  const Nanos span = records.empty() ? 0 : records.back().offset - records.front().offset;
  const double mean_gap =
      records.size() > 1 ? static_cast<double>(span) / static_cast<double>(records.size() - 1)
                         : 0.0;
  // One pass lasts the span plus a typical gap, so the next pass's first request doesn't
  // land on top of this pass's last one.
  const Nanos period = span + static_cast<Nanos>(std::llround(mean_gap));
  if (options.loop && period <= 0) return invalid("workload.loop: needs a trace whose arrivals span some time");
  // Counted before the replay starts: every copy, and every pass that starts within duration.
  const double passes =
      options.loop ? std::floor(NanosToSeconds(options.duration) * options.rate_scale / NanosToSeconds(period)) + 1 : 1;
  const double expected = static_cast<double>(records.size()) * options.replicas * passes;
  if (!(expected <= kMaxSimulatedRequests)) {
    return invalid(fmt::format("workload.{}: {} replica(s) x {:.3g} pass(es) of the {}-request trace are {:.3g} "
                               "requests, more than the simulator's maximum of {:.0e}",
                               options.loop ? "rate_scale" : "replicas", options.replicas, passes, records.size(),
                               expected, kMaxSimulatedRequests));
  }
  Rng rng(options.seed);
  std::vector<Nanos> jitters(options.replicas, 0);
  for (int k = 1; k < options.replicas; ++k) {
    jitters[k] = static_cast<Nanos>(rng.Fork(k).Uniform() * mean_gap / options.rate_scale);
  }
  return std::make_unique<TraceWorkload>(std::move(records), options, period,
                                         std::move(jitters));
}

}  // namespace myriad::sim
