#pragma once
// The byte-level BPE model of tokenizer.json (`model.type == "BPE"`): the vocabulary, the merge
// ranks, and the merge loop over one pre-token's bytes.
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "tokenizer/merge_table.h"
#include "tokenizer/word_hash.h"

namespace myriad::tokenizer {

// Buffers reused across words so the merge loop allocates nothing once warm.
struct BpeScratch {
  std::vector<uint32_t> ids;
  struct Symbol {
    uint32_t id;
    int32_t prev, next;
    bool alive;
  };
  std::vector<Symbol> symbols;
  struct Candidate {
    uint32_t rank, pos;
  };
  std::vector<Candidate> heap;
};

class BpeModel {
 public:
  static constexpr uint32_t kNone = 0xFFFFFFFFu;

  // Parses `model` (the value of `field`). Errors name the field: an unknown type, a merge
  // whose parts or result are not in the vocabulary, options byte-level BPE does not use.
  static absl::StatusOr<BpeModel> Parse(const nlohmann::json& model, const std::string& field);

  // Appends the ids of one pre-token (raw bytes, not byte-level spelling).
  void Encode(std::string_view word, std::vector<uint32_t>& out, BpeScratch& scratch) const;

  // The id of a pre-token that BPE turns into exactly one vocabulary token, or kNone. A
  // lookup table of every such token, filled at load time by running the merges on each
  // token's bytes: the result is the same as merging, at the cost of one hash lookup.
  uint32_t WholeWord(std::string_view word) const {
    auto it = whole_words_.find(word);
    return it == whole_words_.end() ? kNone : it->second;
  }

  // Hugging Face's merge loop (a heap of candidate merges) on any word, without the whole-word
  // table or the short-word loop: the reference those are tested against.
  void EncodeReference(std::string_view word, std::vector<uint32_t>& out, BpeScratch& scratch) const;

  // The id of byte `b` as a one-byte token (kNone when the vocabulary lacks it).
  uint32_t ByteId(uint8_t b) const { return byte_ids_[b]; }

  // Vocabulary entries in their tokenizer.json spelling ("Ġthe").
  std::optional<uint32_t> TokenToId(std::string_view token) const;
  const std::vector<std::string>& id_to_token() const { return id_to_token_; }
  size_t size() const { return vocab_.size(); }

 private:
  // `bytes`: the word when each of its bytes is one symbol of s.ids, else empty.
  void MergeLinear(std::string_view bytes, std::vector<uint32_t>& out, const std::vector<uint32_t>& ids) const;
  // The word's bytes as one-byte tokens into s.ids (bytes the vocabulary lacks dropped).
  void ByteIds(std::string_view word, BpeScratch& s) const;
  void MergeHeap(std::vector<uint32_t>& out, BpeScratch& s) const;

  absl::flat_hash_map<std::string, uint32_t> vocab_;  // spelling -> id
  std::vector<std::string> id_to_token_;               // id -> spelling ("" for gaps)
  MergeTable merges_;
  std::vector<MergeTable::Merge> byte_pairs_;  // (byte << 8 | byte) -> the merge of their tokens
  std::array<uint32_t, 256> byte_ids_{};
  uint32_t unk_id_ = kNone;
  bool ignore_merges_ = false;
  void BuildWholeWords();
  void MergeWord(std::string_view word, std::vector<uint32_t>& out, BpeScratch& scratch) const;

  std::vector<char> whole_arena_;  // the keys' bytes; a vector's buffer survives moves
  absl::flat_hash_map<std::string_view, uint32_t, WordHash> whole_words_;
};

}  // namespace myriad::tokenizer
