#include "policy/load_ranking.h"

#include "policy/load_balancer.h"

namespace myriad::policy {

LoadRanking::LoadRanking(Phase phase, size_t candidates) : phase_(phase), size_(candidates), leaves_(1) {
  while (leaves_ < candidates) leaves_ *= 2;
  keys_.assign(candidates, LoadKey{0, 0});
  win_.assign(candidates == 0 ? 0 : 2 * leaves_, kNone);
}

bool LoadRanking::Beats(int32_t x, int32_t y) const {
  if (x == kNone) return false;
  if (y == kNone) return true;
  const LoadKey& kx = keys_[static_cast<size_t>(x)];
  const LoadKey& ky = keys_[static_cast<size_t>(y)];
  if (kx.first != ky.first) return kx.first < ky.first;
  if (kx.second != ky.second) return kx.second < ky.second;
  return x < y;
}

void LoadRanking::Update(size_t candidate, const UnitLoad& load) {
  if (candidate >= size_) return;
  const LoadKey key = LeastLoadedKey(load, phase_);
  const int32_t c = static_cast<int32_t>(candidate);
  const int32_t leaf = load.available ? c : kNone;
  size_t i = leaves_ + candidate;
  LoadKey& k = keys_[candidate];
  if (win_[i] == leaf && k.first == key.first && k.second == key.second) return;  // most updates
  win_[i] = leaf;
  k = key;
  for (i /= 2; i >= 1; i /= 2) {
    const int32_t l = win_[2 * i], r = win_[2 * i + 1];
    const int32_t w = Beats(r, l) ? r : l;
    // A subtree won by the same other candidate as before is unchanged, and so is all above.
    if (win_[i] == w && w != c) break;
    win_[i] = w;
  }
}

}  // namespace myriad::policy
