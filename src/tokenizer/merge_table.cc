#include "tokenizer/merge_table.h"

namespace myriad::tokenizer {

MergeTable::MergeTable(size_t merges) {
  int bits = 4;
  while ((size_t{1} << bits) * 5 / 8 < merges + 1) ++bits;
  slots_ = HugeArray<Slot>((size_t{1} << bits) + 1, Slot{kEmpty, kNone, kNone});
  mask_ = (size_t{1} << bits) - 1;
  shift_ = 64 - bits;
}

void MergeTable::Insert(uint32_t a, uint32_t b, uint32_t rank, uint32_t result) {
  const uint64_t key = Key(a, b);
  for (size_t i = Home(key);; i = (i + 1) & mask_) {
    Slot& s = slots_[i];
    if (s.key == kEmpty || s.key == key) {
      s = Slot{key, rank, result};
      return;
    }
  }
}

}  // namespace myriad::tokenizer
