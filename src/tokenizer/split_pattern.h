#pragma once
// The regular expressions of `Split` pre-tokenizers. The patterns of the models we serve
// (GPT-2, cl100k / Llama 3, Qwen 2/3, DeepSeek-V3) have hand-written matchers that read Unicode
// classes from a table, several times faster than a regex engine; any other pattern runs on
// PCRE2 (JIT, UTF + UCP), whose syntax and leftmost-first semantics match Oniguruma's, the
// engine Hugging Face uses, for the constructs tokenizer files use.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace myriad::tokenizer {

// A piece of a pre-tokenized text: `len` bytes from `offset`.
struct Piece {
  uint32_t offset;
  uint32_t len;
  bool operator==(const Piece&) const = default;
};

class SplitPattern {
 public:
  virtual ~SplitPattern() = default;

  // Appends to `out` every match in `s` and every gap between matches, in order, as pieces
  // offset by `base` (Split with behavior Isolated): SplitIsolatedSome without a limit.
  void SplitIsolated(std::string_view s, uint32_t base, std::vector<Piece>& out) const;
  // The same in parts: appends pieces until `out` holds at least `limit` or `s` is done (then
  // returns true), keeping where it stopped in `state` (zeroed before the first call). The
  // pieces of all the calls together are SplitIsolated's. Built-in patterns override it with
  // the same loop over their inlined matcher instead of a virtual Find per piece.
  struct SplitState {
    size_t pos = 0, from = 0;
  };
  virtual bool SplitIsolatedSome(std::string_view s, uint32_t base, SplitState& state, std::vector<Piece>& out,
                                 size_t limit) const;

  // Finds the leftmost non-empty match in `s` that starts at or after `from`; false when none.
  // Thread-safe: patterns are immutable after construction.
  virtual bool Find(std::string_view s, size_t from, size_t& start, size_t& end) const = 0;

  // "builtin:<name>", "pcre2" or "literal", for tests and diagnostics.
  virtual std::string_view Kind() const = 0;
};

// A regex from tokenizer.json (`{"Regex": ...}`): a hand-written matcher when the pattern is
// one we know, PCRE2 otherwise (or always, when `force_pcre2`, for the equivalence tests).
// An uncompilable pattern is an error naming `field`.
absl::StatusOr<std::unique_ptr<SplitPattern>> CompileRegex(std::string_view pattern,
                                                           std::string_view field,
                                                           bool force_pcre2 = false);

// A literal string (`{"String": ...}`); empty literals are rejected by the caller.
std::unique_ptr<SplitPattern> LiteralPattern(std::string literal);

// The GPT-2 pattern ByteLevel applies when `use_regex` is true.
std::unique_ptr<SplitPattern> Gpt2Pattern();

}  // namespace myriad::tokenizer
