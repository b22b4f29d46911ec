#include "policy/slot_cache.h"

#include <algorithm>

namespace myriad::policy {

template <typename Key>
BasicSlotCache<Key>::BasicSlotCache(int slots, double similarity)
    : slots_(static_cast<size_t>(std::max(slots, 1))), similarity_(std::clamp(similarity, 0.0, 1.0)) {}

template <typename Key>
size_t BasicSlotCache<Key>::CommonPrefix(std::span<const Key> a, std::span<const Key> b) {
  const size_t n = std::min(a.size(), b.size());
  return static_cast<size_t>(std::mismatch(a.begin(), a.begin() + static_cast<std::ptrdiff_t>(n), b.begin()).first -
                             a.begin());
}

template <typename Key>
std::optional<int> BasicSlotCache<Key>::Pick(std::span<const Key> prompt) const {
  std::optional<int> best;
  if (similarity_ > 0 && !prompt.empty()) {
    // Strictly above the threshold and strictly better: the first slot of equal similarity
    // keeps the choice.
    double best_sim = 0;
    for (size_t i = 0; i < slots_.size(); ++i) {
      const Slot& s = slots_[i];
      if (s.processing || s.keys.empty()) continue;
      const double sim = static_cast<double>(CommonPrefix(s.keys, prompt)) / static_cast<double>(prompt.size());
      if (sim > best_sim && sim > similarity_) {
        best_sim = sim;
        best = static_cast<int>(i);
      }
    }
    if (best) return best;
  }
  // Least recently used: `<=`, so among equals (never used: -1) the last slot wins, as there.
  int64_t oldest = -1;
  for (size_t i = 0; i < slots_.size(); ++i) {
    const Slot& s = slots_[i];
    if (s.processing) continue;
    if (!best || s.last_used <= oldest) {
      oldest = s.last_used;
      best = static_cast<int>(i);
    }
  }
  return best;
}

template <typename Key>
int64_t BasicSlotCache<Key>::Start(int slot, std::span<const Key> prompt) {
  Slot& s = slots_[static_cast<size_t>(slot)];
  size_t reuse = CommonPrefix(s.keys, prompt);
  if (reuse == prompt.size() && reuse > 0) --reuse;
  s.processing = true;
  s.keys.assign(prompt.begin(), prompt.end());
  return static_cast<int64_t>(reuse);
}

template <typename Key>
void BasicSlotCache<Key>::Release(int slot, std::vector<Key> keys, int64_t now) {
  Slot& s = slots_[static_cast<size_t>(slot)];
  s.processing = false;
  s.keys = std::move(keys);
  s.last_used = now;
}

template <typename Key>
void BasicSlotCache<Key>::ClearIdle() {
  for (Slot& s : slots_) {
    if (!s.processing) s.keys.clear();
  }
}

template <typename Key>
int BasicSlotCache<Key>::idle() const {
  return static_cast<int>(std::count_if(slots_.begin(), slots_.end(), [](const Slot& s) { return !s.processing; }));
}

template class BasicSlotCache<uint32_t>;
template class BasicSlotCache<BlockKey>;

}  // namespace myriad::policy
