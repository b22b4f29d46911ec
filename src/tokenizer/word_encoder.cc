#include "tokenizer/word_encoder.h"

#include <algorithm>
#include <cstring>

namespace myriad::tokenizer {
namespace {

// Bytes of cache per word: the entry (a header, about 3 ids, about 10 bytes of key) and the
// pending entry a new word has first. When the arena fills before `cache_words`, the cache
// empties early rather than growing.
constexpr size_t kArenaWordsPerWord = 12;
// Pieces hashed, prefetched and looked up together (Encode's pipeline), and how many such
// batches ahead of the lookups the hashing runs.
constexpr size_t kBatch = 16;
constexpr size_t kAhead = 2;
// The same for the whole-word probes of the jobs.
constexpr size_t kJobAhead = 16;
constexpr size_t kJobEntryAhead = 8;
// Open jobs that make a flush: enough to keep MergeMany's lanes busy, few enough that the
// output's tail they fill in is still in the processor's cache.
constexpr size_t kFlushJobs = 256;

// Copies n ids from src to dst, where dst is at or right of src or the two do not overlap:
// backward, each block loaded before it is stored, in fixed-size moves rather than a memmove
// call for the few ids that Fill's stretches and spans mostly are.
inline void MoveIdsRight(uint32_t* dst, const uint32_t* src, size_t n) {
  if (n > 32) {
    std::memmove(dst, src, n * sizeof(uint32_t));
    return;
  }
  while (n >= 4) {
    n -= 4;
    uint32_t t[4];
    std::memcpy(t, src + n, sizeof t);
    std::memcpy(dst + n, t, sizeof t);
  }
  if (n >= 2) {
    n -= 2;
    uint32_t t[2];
    std::memcpy(t, src + n, sizeof t);
    std::memcpy(dst + n, t, sizeof t);
  }
  if (n == 1) dst[0] = src[0];
}

}  // namespace

WordEncoder::WordEncoder(size_t cache_words) : cache_(cache_words, cache_words * kArenaWordsPerWord) {}

void WordEncoder::EncodeSome(const BpeModel& model, std::string_view text, std::span<const Piece> pieces,
                             std::vector<uint32_t>& out) {
  const size_t n = pieces.size();
  // A pipeline over batches of kBatch pieces: the batch kAhead ahead is hashed and its cache
  // slots prefetched (a tight loop of independent hashes, the hash inlined), and this batch is
  // looked up. The entries the slots point to are not prefetched: reading a slot for that,
  // before it was in, cost more than the entries' misses (mostly entries written by this call).
  uint64_t ring[kAhead + 1][kBatch];
  auto hash_batch = [&](size_t b) {
    uint64_t* h = ring[(b / kBatch) % (kAhead + 1)];
    const size_t m = std::min(kBatch, n - b);
    for (size_t j = 0; j < m; ++j) {
      const Piece p = pieces[b + j];
      const std::string_view word = text.substr(p.offset, p.len);
      // All but the text's last few words have 16 readable bytes from their start.
      h[j] = p.offset + 16 <= text.size() ? WordTable::HashReadable(word) : WordTable::Hash(word);
      cache_.PrefetchSlot(h[j]);
    }
  };
  for (size_t b = 0; b < std::min(n, kAhead * kBatch); b += kBatch) hash_batch(b);
  for (size_t b = 0; b < n; b += kBatch) {
    if (b + kAhead * kBatch < n) hash_batch(b + kAhead * kBatch);
    const uint64_t* hashes = ring[(b / kBatch) % (kAhead + 1)];
    const size_t m = std::min(kBatch, n - b);
    for (size_t j = 0; j < m; ++j) {
      const Piece p = pieces[b + j];
      // A piece of one byte takes the same path as any other: a branch of its own was
      // mispredicted about as often as such pieces come (punctuation, digits).
      if (p.len == 0) [[unlikely]] continue;
      const uint64_t h = hashes[j];
      const std::string_view word = text.substr(p.offset, p.len);
      const uint32_t* e =
          p.offset + 16 <= text.size() ? cache_.FindReadable(word, h) : cache_.Find(word, h);
      if (e != nullptr) {
        const uint32_t count = WordTable::Count(e);
        if (count != WordTable::kPending) {
          for (uint32_t k = 0; k < count; ++k) out.push_back(WordTable::Ids(e)[k]);
          continue;
        }
        placeholders_.push_back({out.size(), WordTable::Ids(e)[0]});
        out.push_back(0);
        continue;
      }
      const bool cache = word.size() <= kMaxCachedBytes && cache_.enabled();
      if (cache && !cache_.HasRoom(word.size(), WordTable::kPending)) {
        Flush(model, out);
        cache_.Clear();
      }
      const auto job = static_cast<uint32_t>(jobs_.size());
      placeholders_.push_back({out.size(), job});
      out.push_back(0);
      jobs_.push_back({word, h, cache ? cache_.Insert(word, h, &job, WordTable::kPending) : 0});
      if (jobs_.size() >= kFlushJobs) Flush(model, out);
    }
  }
}

void WordEncoder::Flush(const BpeModel& model, std::vector<uint32_t>& out) {
  if (jobs_.empty()) return;
  Resolve(model);
  CacheResults();
  Fill(out);
  jobs_.clear();
  placeholders_.clear();
  job_ids_.clear();
  job_spans_.clear();
}

void WordEncoder::Resolve(const BpeModel& model) {
  const WordTable& whole = model.whole_words();
  const size_t end = jobs_.size();
  job_spans_.resize(end);
  merge_words_.clear();
  merge_jobs_.clear();
  for (size_t k = 0; k < std::min(end, kJobAhead); ++k) whole.PrefetchSlot(jobs_[k].hash);
  for (size_t k = 0; k < end; ++k) {
    if (k + kJobAhead < end) whole.PrefetchSlot(jobs_[k + kJobAhead].hash);
    if (k + kJobEntryAhead < end) whole.PrefetchEntry(jobs_[k + kJobEntryAhead].hash);
    const Job& job = jobs_[k];
    if (const uint32_t* e = whole.Find(job.word, job.hash)) {
      job_spans_[k] = IdSpan{static_cast<uint32_t>(job_ids_.size()), 1};
      job_ids_.push_back(WordTable::Ids(e)[0]);
    } else {
      merge_words_.push_back(job.word);
      merge_jobs_.push_back(static_cast<uint32_t>(k));
    }
  }
  if (!merge_words_.empty()) {
    model.MergeMany(merge_words_, job_ids_, merge_spans_, bpe_);
    for (size_t m = 0; m < merge_jobs_.size(); ++m) {
      job_spans_[merge_jobs_[m]] = IdSpan{merge_spans_[m].offset, merge_spans_[m].count};
    }
  }
}

void WordEncoder::CacheResults() {
  for (size_t k = 0; k < jobs_.size(); ++k) {
    const Job& job = jobs_[k];
    if (job.entry == 0) continue;
    const IdSpan span = job_spans_[k];
    if (!cache_.FitsInPlace(span.count) && !cache_.HasRoom(job.word.size(), span.count, /*new_word=*/false)) {
      // No room to finish: forget everything rather than leave entries naming this call's jobs.
      cache_.Clear();
      return;
    }
    cache_.Replace(job.word, job.hash, job.entry, job_ids_.data() + span.offset, span.count);
  }
}

void WordEncoder::Fill(std::vector<uint32_t>& out) {
  // A placeholder whose job has one id (most: whole words, and merged words that end as one
  // token) takes it in place; only the others, listed in wide_, move the ids after them.
  bool shrinks = false;
  size_t grow = 0;
  wide_.resize(placeholders_.size());
  size_t nwide = 0;
  uint32_t* o = out.data();
  const uint32_t* ids = job_ids_.data();
  for (const Placeholder& ph : placeholders_) {
    const IdSpan span = job_spans_[ph.job];
    const uint32_t c = span.count;
    if (c == 0) shrinks = true;
    grow += c - (c > 0);
    if (c > 0) o[ph.pos] = ids[span.offset];  // for c > 1, overwritten below
    wide_[nwide] = ph;
    nwide += c != 1;
  }
  wide_.resize(nwide);
  if (shrinks) {
    // A word whose every byte the vocabulary lacks has no ids: rebuild (rare).
    fill_.clear();
    size_t from = 0;
    for (const Placeholder& ph : wide_) {
      fill_.insert(fill_.end(), out.begin() + static_cast<ptrdiff_t>(from), out.begin() + static_cast<ptrdiff_t>(ph.pos));
      const IdSpan span = job_spans_[ph.job];
      fill_.insert(fill_.end(), job_ids_.begin() + span.offset, job_ids_.begin() + span.offset + span.count);
      from = ph.pos + 1;
    }
    fill_.insert(fill_.end(), out.begin() + static_cast<ptrdiff_t>(from), out.end());
    out.swap(fill_);
    return;
  }
  // In place from the back: each stretch between placeholders moves right by the ids that the
  // placeholders before it add.
  // The stretches and spans are mostly a few ids: copied inline, not by a memmove call each.
  if (grow == 0) return;
  size_t src_end = out.size();
  out.resize(out.size() + grow);
  size_t dst_end = out.size();
  o = out.data();
  for (size_t k = wide_.size(); k-- > 0;) {
    const Placeholder& ph = wide_[k];
    const size_t stretch = src_end - (ph.pos + 1);
    if (dst_end != src_end) MoveIdsRight(o + dst_end - stretch, o + ph.pos + 1, stretch);
    dst_end -= stretch;
    const IdSpan span = job_spans_[ph.job];
    dst_end -= span.count;
    MoveIdsRight(o + dst_end, ids + span.offset, span.count);
    src_end = ph.pos;
  }
}

}  // namespace myriad::tokenizer
