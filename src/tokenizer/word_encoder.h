#pragma once
// The ids of a pre-tokenized text: each piece through a per-call word cache, then the model's
// table of whole-vocabulary words, then the merges. Built for a cache that is cold: a word the
// cache lacks becomes a job, its place in the output a placeholder, and every few hundred jobs
// are resolved together (whole-word probes prefetched ahead, merges of many words interleaved,
// MergeMany) so that their cache misses overlap; then the placeholders are filled in. A word
// that comes again while its job is open finds the job in the cache. Not thread-safe: each
// concurrent Encode call owns one (Tokenizer's context pool), and its cache persists.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "tokenizer/bpe.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/word_table.h"

namespace myriad::tokenizer {

class WordEncoder {
 public:
  // Caches at most `cache_words` words (0: none). When the cache is full it empties itself,
  // which keeps lookups cheap and memory fixed, at the price of a burst of misses.
  explicit WordEncoder(size_t cache_words);

  static constexpr size_t kMaxCachedBytes = 128;  // longer pre-tokens are rare: not worth a slot

  // Appends the ids of `pieces` of `text` to `out`.
  void Encode(const BpeModel& model, std::string_view text, std::span<const Piece> pieces, std::vector<uint32_t>& out) {
    out.reserve(out.size() + text.size());  // at most one id (or placeholder) per byte
    EncodeSome(model, text, pieces, out);
    Finish(model, out);
  }
  // The same in parts: EncodeSome for each run of pieces, in order, then Finish, which gives
  // `out` its final ids (before it, some may be placeholders). `text` must outlive Finish. The
  // caller reserves `out` (at most one id per byte of text).
  void EncodeSome(const BpeModel& model, std::string_view text, std::span<const Piece> pieces,
                  std::vector<uint32_t>& out);
  void Finish(const BpeModel& model, std::vector<uint32_t>& out) { Flush(model, out); }

  void ClearCache() { cache_.Clear(); }
  size_t cached_words() const { return cache_.size(); }

 private:
  struct Job {
    std::string_view word;
    uint64_t hash;
    uint32_t entry;  // the pending entry in the cache, 0 if none
  };
  struct Placeholder {
    size_t pos;  // in out
    uint32_t job;
  };
  // Resolves every open job, caches its ids, fills in its placeholders, and forgets it.
  void Flush(const BpeModel& model, std::vector<uint32_t>& out);
  // Gives every job its ids (job_spans_ into job_ids_).
  void Resolve(const BpeModel& model);
  // Points the cache's pending entries at their jobs' ids.
  void CacheResults();
  // Replaces the placeholders in `out` by their jobs' ids.
  void Fill(std::vector<uint32_t>& out);

  WordTable cache_;
  std::vector<Job> jobs_;
  std::vector<Placeholder> placeholders_;
  std::vector<Placeholder> wide_;  // Fill's placeholders of other than one id
  std::vector<uint32_t> job_ids_;
  std::vector<IdSpan> job_spans_;
  std::vector<std::string_view> merge_words_;
  std::vector<uint32_t> merge_jobs_;
  std::vector<IdSpan> merge_spans_;
  std::vector<uint32_t> fill_;
  BpeScratch bpe_;
};

}  // namespace myriad::tokenizer
