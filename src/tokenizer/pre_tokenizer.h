#pragma once
// The `pre_tokenizer` of tokenizer.json as a flat list of steps (Sequence flattened), each of
// which cuts every piece of the text further. Pieces are offsets into one text buffer, so a
// whole prompt is pre-tokenized without allocating per piece.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "absl/status/statusor.h"
#include "tokenizer/split_pattern.h"

namespace myriad::tokenizer {

// Buffers one Encode call reuses from piece to piece.
struct PreTokenizeScratch {
  std::vector<Piece> next;
  struct Segment {
    uint32_t begin, end;
    bool is_match;
  };
  std::vector<Segment> segments;
};

class PreTokenizeStep {
 public:
  virtual ~PreTokenizeStep() = default;
  // Appends the pieces `in` splits into to `out`. May append to `text` (ByteLevel's prefix
  // space; then Appends() is true), so it takes no views of it across calls.
  virtual void Split(std::string& text, const std::vector<Piece>& in, std::vector<Piece>& out,
                     PreTokenizeScratch& scratch) const = 0;
  // The same for a step that never appends (Appends() false), on a text it cannot change.
  virtual void SplitView(std::string_view text, const std::vector<Piece>& in, std::vector<Piece>& out,
                         PreTokenizeScratch& scratch) const = 0;
  virtual bool Appends() const { return false; }
  // The pattern of a Split whose behavior is Isolated (every match and gap a piece), else null.
  virtual const SplitPattern* IsolatedPattern() const { return nullptr; }
  virtual std::string Describe() const = 0;
};

class PreTokenizer {
 public:
  // Runs every step over `pieces` in place.
  void Run(std::string& text, std::vector<Piece>& pieces, PreTokenizeScratch& scratch) const;
  // The same without a copy of the text, for pre-tokenizers that do not append to it.
  void RunView(std::string_view text, std::vector<Piece>& pieces, PreTokenizeScratch& scratch) const;
  // Whether a step appends to the text (ByteLevel's add_prefix_space): Run, not RunView.
  bool appends() const { return appends_; }

  // RunView in parts, for pre-tokenizers whose every step is an Isolated Split (streams()):
  // each Next replaces `pieces` by the next few hundred pieces of the text, false when none
  // are left; all of them in order are RunView's. A caller can then use each part while its
  // bytes and pieces are still in the processor's cache.
  bool streams() const { return streams_ && !steps_.empty(); }
  struct Stream {
    SplitPattern::SplitState first;
    bool done = false;
  };
  bool Next(std::string_view text, Stream& stream, std::vector<Piece>& pieces, PreTokenizeScratch& scratch) const;
  // One line per step, e.g. "Split(builtin:qwen2, Isolated)", for tests and `myriad tokenize`.
  std::string Describe() const;
  bool empty() const { return steps_.empty(); }
  void Add(std::unique_ptr<PreTokenizeStep> step) {
    appends_ = appends_ || step->Appends();
    streams_ = streams_ && step->IsolatedPattern() != nullptr;
    steps_.push_back(std::move(step));
  }

 private:
  std::vector<std::unique_ptr<PreTokenizeStep>> steps_;
  bool appends_ = false;
  bool streams_ = true;
};

// Parses `j`, the value of `field`; null gives no steps. `force_pcre2` bypasses the
// hand-written matchers (equivalence tests).
absl::StatusOr<PreTokenizer> ParsePreTokenizer(const nlohmann::json& j, const std::string& field,
                                               bool force_pcre2 = false);

}  // namespace myriad::tokenizer
