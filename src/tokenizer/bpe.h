#pragma once
// The byte-level BPE model of tokenizer.json (`model.type == "BPE"`): the vocabulary, the merge
// ranks, and the merge loop over one pre-token's bytes.
#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "tokenizer/merge_table.h"
#include "tokenizer/word_table.h"

namespace myriad::tokenizer {

struct IdSpan {
  uint32_t offset, count;
};

// Words up to this many symbols merge by rescanning the pair ranks (quadratic but cache-
// friendly); longer ones (whitespace runs, base64) use Hugging Face's heap, which is linear-
// logarithmic. Both apply the lowest-ranked, then leftmost, pair first, so they agree.
inline constexpr size_t kLinearMax = 48;  // a multiple of 4 (MergeMany's vector scan)
// Words up to this many bytes (most new words of a prompt) take MergeMany's short lanes when
// the merged id orders merges (MergeTable::narrow): pair keys (rank and position) in vector registers.
inline constexpr size_t kShortMax = 16;

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
  // MergeMany's words in flight: the symbols of each as a list in place (a merge unlinks the
  // right symbol, so nothing moves), and the rank and result of merging each symbol with its
  // successor (kNone for a symbol unlinked or last).
  struct Lane {
    uint32_t word, n, npending;
    uint32_t pending[2];
    MergeTable::Probe probes[2];
    int32_t ranks[kLinearMax + 4];  // INT32_MAX: no merge; the last, a scratch the scan skips
    uint32_t ids[kLinearMax], results[kLinearMax + 4];
    uint8_t next[kLinearMax], prev[kLinearMax + 1];  // prev[kLinearMax]: a scratch
  };
  std::vector<Lane> lanes;
  // The short lanes: as Lane, for at most kShortMax symbols of one byte each, where a rank is
  // the merged id and a pair's rank and position make one key (MergeShort). The keys of the
  // two pairs a merge made are not stored before the next round reads them (a scalar store
  // read back by a vector load stalls): they stay "no merge" in `keys` and join the minimum in
  // registers.
  struct alignas(64) ShortLane {
    uint32_t keys[kShortMax + 2];  // [kShortMax, +2): scratch keys, never read
    // Symbols [0, n). A merge reads and writes its neighbours with no branch on whether they
    // exist: the one after the last is n, the one before the first kShortMax + 1, and
    // ids[n], ids[kShortMax + 1] and prev[n] are scratch.
    uint32_t ids[kShortMax + 2];
    uint8_t next[kShortMax], prev[kShortMax + 1];
    uint32_t word, n;
    uint32_t pending[2];
    MergeTable::Probe probes[2];
  };
  std::vector<ShortLane> short_lanes;
  std::vector<uint32_t> rest;  // words the short lanes leave to the general ones
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
    const uint32_t* e = whole_words_.Find(word, WordTable::Hash(word));
    return e == nullptr ? kNone : WordTable::Ids(e)[0];
  }
  // The same table, for callers that hash a word once and prefetch.
  const WordTable& whole_words() const { return whole_words_; }

  // Merges every word of `words` (as Encode does when WholeWord has no answer), working on
  // several at a time so that one word's merge-table probes overlap the others' work: word k's
  // ids are appended to `ids` (in no particular order) at spans[k].
  void MergeMany(std::span<const std::string_view> words, std::vector<uint32_t>& ids,
                 std::vector<IdSpan>& spans, BpeScratch& scratch) const;

  // Hugging Face's merge loop (a heap of candidate merges) on any word, without the whole-word
  // table or the short-word loop: the reference those are tested against.
  void EncodeReference(std::string_view word, std::vector<uint32_t>& out, BpeScratch& scratch) const;

  // Whether the merged ids rise with the rank (MergeTable::narrow), which MergeMany's short
  // lanes need; for tests.
  bool narrow_merges() const { return merges_.narrow(); }

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
  // MergeMany's two kinds of lanes: MergeShort takes the words it can and lists the others in
  // s.rest; MergeLanes takes words[which[k]] for k < count (every word when `which` is null).
  void MergeShort(std::span<const std::string_view> words, std::vector<uint32_t>& ids, std::vector<IdSpan>& spans,
                  BpeScratch& s) const;
  void MergeLanes(std::span<const std::string_view> words, const uint32_t* which, size_t count,
                  std::vector<uint32_t>& ids, std::vector<IdSpan>& spans, BpeScratch& s) const;

  absl::flat_hash_map<std::string, uint32_t> vocab_;  // spelling -> id
  std::vector<std::string> id_to_token_;               // id -> spelling ("" for gaps)
  MergeTable merges_;
  std::vector<MergeTable::Merge> byte_pairs_;  // (byte << 8 | byte) -> the merge of their tokens
  std::array<uint32_t, 256> byte_ids_{};
  uint32_t unk_id_ = kNone;
  bool ignore_merges_ = false;
  void BuildWholeWords();
  void MergeWord(std::string_view word, std::vector<uint32_t>& out, BpeScratch& scratch) const;

  WordTable whole_words_{0, 0};
};

}  // namespace myriad::tokenizer
