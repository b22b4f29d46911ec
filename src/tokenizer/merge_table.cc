#include "tokenizer/merge_table.h"

#include <algorithm>

namespace myriad::tokenizer {
namespace {
// Narrow buckets hold 8; at 2-4 pairs a bucket on average, one in several thousand overflows.
constexpr size_t kPairsPerBucket = 3;
constexpr int kMinBucketBits = 9;  // so remainders have at most 31 bits, below kEmptyRem
}  // namespace

const MergeTable::Bucket MergeTable::kEmptyBucket = {
    {kEmptyRem, kEmptyRem, kEmptyRem, kEmptyRem, kEmptyRem, kEmptyRem, kEmptyRem, kEmptyRem}, {}};

MergeTable::MergeTable(const std::vector<Entry>& merges) {
  // Narrow when the merged ids rise strictly with the rank (so no pair repeats either) and
  // every id fits in 20 bits.
  narrow_ = true;
  constexpr uint32_t kMaxNarrowId = (uint32_t{1} << kIdBits) - 2;
  for (size_t i = 0; i < merges.size() && narrow_; ++i) {
    const Entry& m = merges[i];
    narrow_ = m.a <= kMaxNarrowId && m.b <= kMaxNarrowId && m.result <= kMaxNarrowId &&
              (i == 0 || m.result > merges[i - 1].result);
  }
  if (narrow_) {
    int bucket_bits = kMinBucketBits;
    while ((size_t{1} << bucket_bits) * kPairsPerBucket < merges.size()) ++bucket_bits;
    rem_bits_ = kKeyBits - bucket_bits;
    rem_mask_ = (uint64_t{1} << rem_bits_) - 1;
    buckets_ = HugeArray<Bucket>(size_t{1} << bucket_bits, kEmptyBucket);
    for (const Entry& m : merges) {
      const uint64_t key = Mix((static_cast<uint64_t>(m.a) << kIdBits) | m.b);
      Bucket& bk = buckets_[key >> rem_bits_];
      const auto rem = static_cast<uint32_t>(key & rem_mask_);
      const auto free = std::find(std::begin(bk.rem), std::end(bk.rem), kEmptyRem);
      if (free == std::end(bk.rem)) {
        bk.result[0] |= kOverflowBit;
        overflow_[key] = m.result;
        continue;
      }
      const auto i = static_cast<size_t>(free - std::begin(bk.rem));
      bk.rem[i] = rem;
      bk.result[i] = (bk.result[i] & kOverflowBit) | m.result;
    }
    return;
  }
  int bits = 4;
  while ((size_t{1} << bits) * 5 / 8 < merges.size() + 1) ++bits;
  mask_ = (size_t{1} << bits) - 1;
  shift_ = 64 - bits;
  wide_slots_ = HugeArray<Wide>(mask_ + 2, Wide{kEmpty, kNone, kNone});
  for (size_t r = 0; r < merges.size(); ++r) {
    const Entry& m = merges[r];
    const uint64_t key = WideKey(m.a, m.b);
    for (size_t i = Home(key);; i = (i + 1) & mask_) {
      Wide& s = wide_slots_[i];
      if (s.key == kEmpty || s.key == key) {
        s = Wide{key, static_cast<uint32_t>(r), m.result};
        break;
      }
    }
  }
}

MergeTable::Merge MergeTable::FindOverflow(uint64_t key) const {
  const auto it = overflow_.find(key);
  if (it == overflow_.end()) return {kNone, kNone};
  return {it->second, it->second};
}

}  // namespace myriad::tokenizer
