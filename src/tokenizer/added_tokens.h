#pragma once
// The `added_tokens` of tokenizer.json (<|im_start|>, <think>, ...): found in the text before
// anything else and emitted as their ids, the text around them encoded normally.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace myriad::tokenizer {

struct AddedToken {
  std::string content;
  uint32_t id;
  bool special;
  bool lstrip;       // swallow whitespace on the left
  bool rstrip;       // swallow whitespace on the right
  bool single_word;  // match only where not inside a word
  bool normalized;   // matched in the normalized text rather than the raw text
};

// Leftmost-longest matching of a set of added tokens (as Hugging Face's Aho-Corasick with
// MatchKind::LeftmostLongest), over a byte trie.
class AddedTokenMatcher {
 public:
  AddedTokenMatcher() = default;
  explicit AddedTokenMatcher(const std::vector<const AddedToken*>& tokens);

  bool empty() const { return tokens_.empty(); }

  struct Match {
    size_t begin, end;  // after lstrip/rstrip
    const AddedToken* token;
  };
  // Finds the next match at or after `from`; false when none.
  bool Next(std::string_view text, size_t from, Match& match) const;

 private:
  struct Node {
    int32_t token = -1;  // index into tokens_ of the token ending here
    uint32_t first_child = 0, child_count = 0;
  };
  struct Edge {
    uint8_t byte;
    uint32_t node;
  };
  // Longest token starting at `i`, or -1.
  int32_t LongestAt(std::string_view text, size_t i, size_t& len) const;

  std::vector<const AddedToken*> tokens_;
  std::vector<Node> nodes_;
  std::vector<Edge> edges_;  // each node's children contiguous, sorted by byte
  bool first_byte_[256] = {};
  int only_first_byte_ = -1;  // the one first byte all tokens share, if they do
};

}  // namespace myriad::tokenizer
