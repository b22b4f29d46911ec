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

int LoadRanking::FirstBestFrom(size_t from) const {
  const int best = Best();
  if (best < 0 || from >= size_) return -1;
  const LoadKey& min = keys_[static_cast<size_t>(best)];
  auto ties = [&](int32_t w) {
    return w != kNone && keys_[static_cast<size_t>(w)].first == min.first &&
           keys_[static_cast<size_t>(w)].second == min.second;
  };
  // Up from the leaf, each right sibling covers the next indices in order; the first subtree
  // whose winner ties holds the answer, at its leftmost tying leaf (a subtree's winner is its
  // first minimum).
  size_t i = leaves_ + from;
  if (ties(win_[i])) return win_[i];
  for (; i > 1; i /= 2) {
    if ((i & 1) != 0 || !ties(win_[i + 1])) continue;
    size_t n = i + 1;
    while (n < leaves_) n = ties(win_[2 * n]) ? 2 * n : 2 * n + 1;
    return win_[n];
  }
  return -1;
}

}  // namespace myriad::policy
