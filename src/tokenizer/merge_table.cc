#include "tokenizer/merge_table.h"

namespace myriad::tokenizer {

MergeTable::MergeTable(const std::vector<Entry>& merges) {
  int bits = 4;
  while ((size_t{1} << bits) * 5 / 8 < merges.size() + 1) ++bits;
  mask_ = (size_t{1} << bits) - 1;
  shift_ = 64 - bits;
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
    narrow_slots_ = HugeArray<uint64_t>(mask_ + 2, kEmpty);
    for (const Entry& m : merges) {
      const uint64_t key = NarrowKey(m.a, m.b);
      size_t i = Home(key);
      while (narrow_slots_[i] != kEmpty) i = (i + 1) & mask_;  // no repeats: checked above
      narrow_slots_[i] = key | m.result;
    }
    return;
  }
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

}  // namespace myriad::tokenizer
