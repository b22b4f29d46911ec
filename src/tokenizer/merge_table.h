#pragma once
// BPE's merges as one hash table: (left id, right id) -> (rank, merged id) in one slot, so
// applying a merge and ranking the pairs it creates cost one probe each and no second,
// dependent lookup of the merged id. A cold-cache encode spends much of its time on these
// probes (the table is megabytes, probed at random), so a probe reads one cache line and takes
// no branch that depends on the table's contents, in the common layout (Qwen, DeepSeek, GPT-2
// style files, whose merged ids rise with the rank and fit in 20 bits: the merged id then
// orders merges as the rank does, and stands for it): buckets of 8 in one 64-byte line, a key
// found by comparing all 8 at once. Other files get 16-byte slots probed linearly.
// Start / Finish split a lookup so a caller can prefetch the line and overlap several waits.
#include <cstddef>
#include <cstdint>
#include <vector>

#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "absl/container/flat_hash_map.h"
#include "core/huge_array.h"

namespace myriad::tokenizer {

class MergeTable {
 public:
  static constexpr uint32_t kNone = 0xFFFFFFFFu;
  struct Merge {
    // Orders merges as their ranks do (the rank, or the merged id when those rise together);
    // kNone when the pair does not merge.
    uint32_t rank;
    uint32_t result;  // the merged token's id
  };
  struct Entry {
    uint32_t a, b, result;
  };

  MergeTable() : MergeTable(std::vector<Entry>{}) {}
  // The merges in rank order. A repeated pair keeps its last rank, as Hugging Face's map does.
  explicit MergeTable(const std::vector<Entry>& merges);

  Merge Find(uint32_t a, uint32_t b) const { return Finish(Start(a, b)); }

  struct Probe {
    uint64_t key;    // narrow: the mixed key (bucket << remainder bits | remainder); wide: a << 32 | b
    const void* at;  // narrow: the bucket; wide: the first slot
  };
  Probe Start(uint32_t a, uint32_t b) const { return StartIf(true, a, b); }
  // Start for a pair that may not exist: when `exists` is false, the probe reads a bucket or
  // slot kept empty (no memory traffic, no branch) and finds no merge.
  Probe StartIf(bool exists, uint32_t a, uint32_t b) const {
    if (narrow_) return StartNarrowIf(exists, a, b);
    const uint64_t key = WideKey(a, b);
    const size_t home = exists ? Home(key) : mask_ + 1;
    __builtin_prefetch(&wide_slots_[home]);
    return {key, &wide_slots_[home]};
  }
  Merge Finish(const Probe& p) const {
    if (narrow_) {
      const uint32_t result = FinishNarrow(p);
      return {result, result};
    }
    for (size_t i = static_cast<size_t>(static_cast<const Wide*>(p.at) - wide_slots_.data());; i = (i + 1) & mask_) {
      const Wide& s = wide_slots_[i];
      if (s.key == p.key) return {s.rank, s.result};
      if (s.key == kEmpty) return {kNone, kNone};
    }
  }
  // StartIf and Finish of a narrow table, for a caller that knows it is one; Finish's result
  // is the merged id (which is the rank) or kNone.
  Probe StartNarrowIf(bool exists, uint32_t a, uint32_t b) const {
    const uint64_t key = Mix((static_cast<uint64_t>(a) << kIdBits) | b);
    // exists ? the bucket : kEmptyBucket, by a mask: a compiler's branch here would be
    // mispredicted about as often as taken.
    const uintptr_t all = -static_cast<uintptr_t>(exists);
    const auto* bucket = reinterpret_cast<const Bucket*>((reinterpret_cast<uintptr_t>(&buckets_[key >> rem_bits_]) & all) |
                                                         (reinterpret_cast<uintptr_t>(&kEmptyBucket) & ~all));
    __builtin_prefetch(bucket);
    return {key, bucket};
  }
  uint32_t FinishNarrow(const Probe& p) const {
    const Bucket& bk = *static_cast<const Bucket*>(p.at);
    const auto rem = static_cast<uint32_t>(p.key & rem_mask_);
    const unsigned hits = Matches(bk, rem);
    // Branch-free: a miss reads result[0] and discards it.
    const uint32_t found = bk.result[__builtin_ctz(hits | 0x100) & 7] & kResultMask;
    // One branch, almost never taken (a pair absent from a bucket that overflowed).
    if (static_cast<unsigned>(hits == 0) & (bk.result[0] >> 31)) [[unlikely]] return FindOverflow(p.key).result;
    return hits != 0 ? found : kNone;
  }

  bool narrow() const { return narrow_; }

 private:
  // Narrow: ids below 2^20 - 1; the 40-bit key a << 20 | b, mixed by a bijection of 40-bit
  // numbers, gives the bucket (its top bits) and a remainder (the rest) that, with the bucket,
  // names the pair exactly.
  static constexpr int kIdBits = 20;
  static constexpr int kKeyBits = 2 * kIdBits;
  static constexpr uint64_t kKeyMask = (uint64_t{1} << kKeyBits) - 1;
  static constexpr uint32_t kResultMask = (uint32_t{1} << kIdBits) - 1;
  static constexpr uint32_t kOverflowBit = uint32_t{1} << 31;  // in result[0]: FindOverflow
  static constexpr uint32_t kEmptyRem = 0xFFFFFFFFu;            // remainders have at most 31 bits
  struct alignas(64) Bucket {
    uint32_t rem[8];
    uint32_t result[8];
  };
  static uint64_t Mix(uint64_t k) {
    // Multiplying by an odd number is invertible modulo 2^40.
    return (k * 0x9E3779B97F4A7C15ull) & kKeyMask;
  }
  // Bit i: rem[i] == rem.
  static unsigned Matches(const Bucket& bk, uint32_t rem) {
#ifdef __SSE2__
    const __m128i r = _mm_set1_epi32(static_cast<int>(rem));
    const __m128i lo = _mm_cmpeq_epi32(_mm_load_si128(reinterpret_cast<const __m128i*>(bk.rem)), r);
    const __m128i hi = _mm_cmpeq_epi32(_mm_load_si128(reinterpret_cast<const __m128i*>(bk.rem + 4)), r);
    return static_cast<unsigned>(_mm_movemask_ps(_mm_castsi128_ps(lo)) | _mm_movemask_ps(_mm_castsi128_ps(hi)) << 4);
#else
    unsigned m = 0;
    for (int i = 0; i < 8; ++i) m |= static_cast<unsigned>(bk.rem[i] == rem) << i;
    return m;
#endif
  }
  Merge FindOverflow(uint64_t key) const;

  struct Wide {
    uint64_t key;
    uint32_t rank, result;
  };
  static constexpr uint64_t kEmpty = ~uint64_t{0};
  static uint64_t WideKey(uint32_t a, uint32_t b) { return (static_cast<uint64_t>(a) << 32) | b; }
  size_t Home(uint64_t key) const { return ((key ^ (key >> 29)) * 0x9E3779B97F4A7C15ull) >> shift_; }

  bool narrow_ = false;
  static const Bucket kEmptyBucket;  // what StartIf(false, ...) reads
  HugeArray<Bucket> buckets_;         // a power of two of them (4 MiB for 150 k merges)
  int rem_bits_ = 0;
  uint64_t rem_mask_ = 0;
  absl::flat_hash_map<uint64_t, uint32_t> overflow_;  // mixed key -> result, of full buckets
  HugeArray<Wide> wide_slots_;  // mask_ + 1 of them, then one always empty (StartIf)
  size_t mask_ = 0;
  int shift_ = 63;
};

}  // namespace myriad::tokenizer
