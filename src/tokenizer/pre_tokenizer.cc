#include "tokenizer/pre_tokenizer.h"

#include <cstdlib>
#include <nlohmann/json.hpp>
#include <utility>

#include "tokenizer/json_util.h"
#include "tokenizer/unicode.h"

namespace myriad::tokenizer {
namespace {

enum class Behavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

const char* BehaviorName(Behavior b) {
  switch (b) {
    case Behavior::kRemoved: return "Removed";
    case Behavior::kIsolated: return "Isolated";
    case Behavior::kMergedWithPrevious: return "MergedWithPrevious";
    case Behavior::kMergedWithNext: return "MergedWithNext";
    case Behavior::kContiguous: return "Contiguous";
  }
  return "?";
}

// Hugging Face's Split: the matches and the gaps between them, then `behavior` decides which
// become pieces (tokenizers/src/tokenizer/normalizer.rs, NormalizedString::split).
class SplitStep final : public PreTokenizeStep {
 public:
  SplitStep(std::unique_ptr<SplitPattern> pattern, Behavior behavior, bool invert)
      : pattern_(std::move(pattern)), behavior_(behavior), invert_(invert) {}

  void Split(std::string& text, const std::vector<Piece>& in, std::vector<Piece>& out,
             PreTokenizeScratch& scratch) const override {
    SplitView(text, in, out, scratch);
  }
  void SplitView(std::string_view text, const std::vector<Piece>& in, std::vector<Piece>& out,
                 PreTokenizeScratch& scratch) const override {
    for (const Piece& p : in) {
      const std::string_view s(text.data() + p.offset, p.len);
      if (behavior_ == Behavior::kIsolated) {
        pattern_->SplitIsolated(s, p.offset, out);
        continue;
      }
      auto& segs = scratch.segments;
      segs.clear();
      FindSegments(s, segs);
      Apply(segs, p.offset, out);
    }
  }

  const SplitPattern* IsolatedPattern() const override {
    return behavior_ == Behavior::kIsolated ? pattern_.get() : nullptr;
  }

  std::string Describe() const override {
    return Cat("Split(", pattern_->Kind(), ", ", BehaviorName(behavior_), invert_ ? ", inverted" : "", ")");
  }

 private:
  void FindSegments(std::string_view s, std::vector<PreTokenizeScratch::Segment>& segs) const {
    size_t pos = 0, from = 0, start, end;
    while (from < s.size() && pattern_->Find(s, from, start, end)) {
      if (start > pos) segs.push_back({static_cast<uint32_t>(pos), static_cast<uint32_t>(start), invert_});
      segs.push_back({static_cast<uint32_t>(start), static_cast<uint32_t>(end), !invert_});
      pos = end;
      if (end > start) {
        from = end;
      } else {
        size_t len;
        DecodeUtf8(s, start, len);
        from = start + len;
      }
    }
    if (pos < s.size()) segs.push_back({static_cast<uint32_t>(pos), static_cast<uint32_t>(s.size()), invert_});
  }

  void Apply(std::vector<PreTokenizeScratch::Segment>& segs, uint32_t base, std::vector<Piece>& out) const {
    auto emit = [&](uint32_t b, uint32_t e) {
      if (e > b) out.push_back({base + b, e - b});
    };
    switch (behavior_) {
      case Behavior::kIsolated:
        for (const auto& g : segs) emit(g.begin, g.end);
        break;
      case Behavior::kRemoved:
        for (const auto& g : segs) {
          if (!g.is_match) emit(g.begin, g.end);
        }
        break;
      case Behavior::kMergedWithPrevious:
      case Behavior::kContiguous: {
        // Fold left: a match joins the piece before it (MergedWithPrevious), or runs of the
        // same kind join (Contiguous).
        std::vector<std::pair<uint32_t, uint32_t>> acc;
        bool previous_match = false;
        for (const auto& g : segs) {
          const bool join = behavior_ == Behavior::kContiguous ? g.is_match == previous_match
                                                                : g.is_match && !previous_match;
          if (join && !acc.empty()) {
            acc.back().second = g.end;
          } else {
            acc.push_back({g.begin, g.end});
          }
          previous_match = g.is_match;
        }
        for (const auto& [b, e] : acc) emit(b, e);
        break;
      }
      case Behavior::kMergedWithNext: {
        std::vector<std::pair<uint32_t, uint32_t>> acc;
        bool previous_match = false;
        for (auto it = segs.rbegin(); it != segs.rend(); ++it) {
          if (it->is_match && !previous_match && !acc.empty()) {
            acc.back().first = it->begin;
          } else {
            acc.push_back({it->begin, it->end});
          }
          previous_match = it->is_match;
        }
        for (auto it = acc.rbegin(); it != acc.rend(); ++it) emit(it->first, it->second);
        break;
      }
    }
  }

  std::unique_ptr<SplitPattern> pattern_;
  Behavior behavior_;
  bool invert_;
};

// ByteLevel's add_prefix_space: a space before every piece that does not start with one.
// (The byte-to-character mapping itself needs no step: the vocabulary is stored as bytes.)
class PrefixSpaceStep final : public PreTokenizeStep {
 public:
  void Split(std::string& text, const std::vector<Piece>& in, std::vector<Piece>& out,
             PreTokenizeScratch&) const override {
    for (const Piece& p : in) {
      if (text[p.offset] == ' ') {
        out.push_back(p);
        continue;
      }
      const auto offset = static_cast<uint32_t>(text.size());
      text.reserve(text.size() + p.len + 1);  // so the append below copies from live storage
      text.push_back(' ');
      text.append(text, p.offset, p.len);
      out.push_back({offset, p.len + 1});
    }
  }
  void SplitView(std::string_view, const std::vector<Piece>&, std::vector<Piece>&,
                 PreTokenizeScratch&) const override {
    std::abort();  // Appends(): PreTokenizer::RunView is never called with this step
  }
  bool Appends() const override { return true; }
  std::string Describe() const override { return "ByteLevel(add_prefix_space)"; }
};

absl::Status ParseInto(const nlohmann::json& j, const std::string& field, bool force_pcre2, PreTokenizer& out) {
  if (j.is_null()) return absl::OkStatus();
  auto type = GetString(j, "type", field);
  if (!type.ok()) return type.status();
  if (*type == "Sequence") {
    auto list = GetArray(j, "pretokenizers", field);
    if (!list.ok()) return list.status();
    for (size_t i = 0; i < (*list)->size(); ++i) {
      if (auto s = ParseInto((**list)[i], Cat(field, ".pretokenizers[", i, "]"), force_pcre2, out); !s.ok()) {
        return s;
      }
    }
    return absl::OkStatus();
  }
  if (*type == "ByteLevel") {
    // Hugging Face's defaults when the keys are absent: both true.
    auto prefix = GetBool(j, "add_prefix_space", field, true);
    if (!prefix.ok()) return prefix.status();
    auto use_regex = GetBool(j, "use_regex", field, true);
    if (!use_regex.ok()) return use_regex.status();
    if (*prefix) out.Add(std::make_unique<PrefixSpaceStep>());
    if (*use_regex) out.Add(std::make_unique<SplitStep>(Gpt2Pattern(), Behavior::kIsolated, false));
    return absl::OkStatus();
  }
  if (*type == "Split") {
    auto pit = j.find("pattern");
    if (pit == j.end() || !pit->is_object()) {
      return absl::InvalidArgumentError(Cat(field, ".pattern: expected {\"Regex\": ...} or {\"String\": ...}"));
    }
    std::unique_ptr<SplitPattern> pattern;
    if (auto r = pit->find("Regex"); r != pit->end() && r->is_string()) {
      auto compiled = CompileRegex(r->get<std::string>(), field + ".pattern.Regex", force_pcre2);
      if (!compiled.ok()) return compiled.status();
      pattern = *std::move(compiled);
    } else if (auto s = pit->find("String"); s != pit->end() && s->is_string() && !s->get<std::string>().empty()) {
      pattern = LiteralPattern(s->get<std::string>());
    } else {
      return absl::InvalidArgumentError(
          Cat(field, ".pattern: expected {\"Regex\": ...} or a non-empty {\"String\": ...}"));
    }
    auto behavior_name = GetString(j, "behavior", field);
    if (!behavior_name.ok()) return behavior_name.status();
    Behavior behavior;
    if (*behavior_name == "Removed") behavior = Behavior::kRemoved;
    else if (*behavior_name == "Isolated") behavior = Behavior::kIsolated;
    else if (*behavior_name == "MergedWithPrevious") behavior = Behavior::kMergedWithPrevious;
    else if (*behavior_name == "MergedWithNext") behavior = Behavior::kMergedWithNext;
    else if (*behavior_name == "Contiguous") behavior = Behavior::kContiguous;
    else return Unsupported(field + ".behavior", *behavior_name);
    auto invert = GetBool(j, "invert", field, false);
    if (!invert.ok()) return invert.status();
    out.Add(std::make_unique<SplitStep>(std::move(pattern), behavior, *invert));
    return absl::OkStatus();
  }
  return Unsupported(field + ".type", *type);
}

}  // namespace

void PreTokenizer::Run(std::string& text, std::vector<Piece>& pieces, PreTokenizeScratch& scratch) const {
  for (const auto& step : steps_) {
    scratch.next.clear();
    step->Split(text, pieces, scratch.next, scratch);
    pieces.swap(scratch.next);
  }
}

void PreTokenizer::RunView(std::string_view text, std::vector<Piece>& pieces, PreTokenizeScratch& scratch) const {
  for (const auto& step : steps_) {
    scratch.next.clear();
    step->SplitView(text, pieces, scratch.next, scratch);
    pieces.swap(scratch.next);
  }
}

bool PreTokenizer::Next(std::string_view text, Stream& stream, std::vector<Piece>& pieces,
                       PreTokenizeScratch& scratch) const {
  // Pieces of the first step per part: a few KiB of text, its pieces well inside L1.
  constexpr size_t kPartPieces = 512;
  pieces.clear();
  if (stream.done) return false;
  stream.done = steps_[0]->IsolatedPattern()->SplitIsolatedSome(text, 0, stream.first, pieces, kPartPieces);
  for (size_t k = 1; k < steps_.size(); ++k) {
    scratch.next.clear();
    const SplitPattern* pattern = steps_[k]->IsolatedPattern();
    for (const Piece& p : pieces) pattern->SplitIsolated(text.substr(p.offset, p.len), p.offset, scratch.next);
    pieces.swap(scratch.next);
  }
  return !pieces.empty() || !stream.done;
}

std::string PreTokenizer::Describe() const {
  std::string s;
  for (const auto& step : steps_) Append(&s, s.empty() ? "" : " -> ", step->Describe());
  return s.empty() ? "none" : s;
}

absl::StatusOr<PreTokenizer> ParsePreTokenizer(const nlohmann::json& j, const std::string& field, bool force_pcre2) {
  PreTokenizer out;
  if (auto s = ParseInto(j, field, force_pcre2, out); !s.ok()) return s;
  return out;
}

}  // namespace myriad::tokenizer
