#pragma once
// Replay of recorded request traces: Mooncake's JSONL (arrival, lengths and 512-token prefix
// block ids) and Azure's LLM inference CSV (arrival and lengths only). Parsing and replay are
// separate so a trace is read once and replayed under many options.
#include <cstdint>
#include <istream>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "core/time.h"
#include "sim/workload.h"

namespace myriad::sim {

// Both trace formats name prefix content in blocks of this many tokens.
inline constexpr int kTraceBlockTokens = 512;

struct TraceRecord {
  Nanos offset = 0;  // since the trace's first request
  int32_t input_tokens = 0;
  int32_t output_tokens = 0;
  // One id per 512-token block of the prompt (the last may be partial); equal ids at equal
  // positions mean shared content. Empty when the trace has no prefix information (Azure):
  // such a request shares nothing with any other.
  std::vector<uint64_t> content_ids;
  // Myriad's extension of Mooncake's format: an optional "tenant" (an index into the
  // scenario's tenants, below kMaxTraceTenants); 0 when absent.
  uint32_t tenant = 0;
};
inline constexpr uint64_t kMaxTraceTenants = 1024;

// Mooncake JSONL: one {"timestamp": ms, "input_length", "output_length", "hash_ids": [...]}
// object per line (and optionally "tenant"), blank lines skipped. Errors are InvalidArgument "source:line: field: what".
absl::StatusOr<std::vector<TraceRecord>> ParseMooncakeTrace(std::istream& in,
                                                            std::string_view source_name);

// Azure CSV with a header naming TIMESTAMP, ContextTokens and GeneratedTokens (any order,
// CRLF tolerated); TIMESTAMP is "YYYY-MM-DD HH:MM:SS[.fraction]". Errors name line and column.
absl::StatusOr<std::vector<TraceRecord>> ParseAzureTrace(std::istream& in,
                                                         std::string_view source_name);

// Opens `path` and parses it as `format`: "mooncake" or "azure". A trace without requests is
// an error naming the file.
absl::StatusOr<std::vector<TraceRecord>> LoadTraceFile(const std::string& path,
                                                       std::string_view format);

// Token ids of prompts generated from a trace are in [0, kReplayVocab): below every real
// vocabulary's size.
inline constexpr uint32_t kReplayVocab = 32000;

// The prompt of trace record `index` as token ids: for each 512-token block, ids that are a pure
// function of (block id, position in the block), the last block cut to the record's input
// length. Blocks the trace gives no id for (Azure, or ids shorter than the prompt) get ids of
// this request's own, so they share nothing. `myriad loadgen --trace` sends these ids, and a
// replay with `token_keys` keys its blocks from them, so both worlds hash the same tokens.
std::vector<uint32_t> TracePromptIds(const TraceRecord& record, uint64_t index);

struct TraceReplayOptions {
  // Arrivals are sped up by this factor (2 = twice the request rate, half the span).
  double rate_scale = 1.0;
  // Copies of the trace with disjoint prefixes, interleaved in time. Copy k > 0 is shifted by a
  // seeded jitter in [0, mean inter-arrival gap) so the copies don't arrive in lockstep.
  int replicas = 1;
  // Repeat the trace back to back, each pass with a fresh prefix space (so a pass cannot hit
  // the previous pass's cache). Needs a positive `duration`, or the stream would never end.
  bool loop = false;
  // The simulator's KV block size; must divide 512 so trace blocks map onto whole sim blocks.
  int block_tokens = 512;
  // No arrivals at or after this simulated time; 0 = until the end of the trace.
  Nanos duration = 0;
  uint64_t seed = 1;
  // Key blocks by hashing TracePromptIds with HashTokenBlocks, as a gateway hashes the prompt
  // `myriad loadgen --trace` sends, instead of from the content ids: slower, but the keys (and
  // the router's tie-breaks on them) are then the live gateway's own. One copy, no loop.
  bool token_keys = false;
};

// Copies of a trace that one run may replay (each holds a jitter for the whole run).
inline constexpr int kMaxTraceReplicas = 1'000'000;

// The first rule `options` breaks that the trace itself does not decide (nullopt: none), fields
// named by their scenario key path.
std::optional<FieldError> CheckTraceOptions(const TraceReplayOptions& options);

// Requests in non-decreasing arrival order, ids 0, 1, 2... Only the prompt's full blocks are
// keyed (input_tokens / block_tokens of them), and never more than the content ids cover.
absl::StatusOr<std::unique_ptr<Workload>> MakeTraceWorkload(std::vector<TraceRecord> records,
                                                            TraceReplayOptions options);

}  // namespace myriad::sim
