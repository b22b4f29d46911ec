#include "policy/load_ranking.h"

#include "policy/load_balancer.h"

namespace myriad::policy {

LoadRanking::LoadRanking(Phase phase, size_t candidates) : phase_(phase), size_(candidates), leaves_(1) {
  while (leaves_ < candidates) leaves_ *= 2;
  tree_.assign(candidates == 0 ? 0 : 2 * leaves_, Node{0, 0, -1});
}

// Lexicographic on (a, b, index); a subtree with no available candidate loses to any other.
bool LoadRanking::Beats(const Node& x, const Node& y) {
  if (x.index < 0) return false;
  if (y.index < 0) return true;
  if (x.a != y.a) return x.a < y.a;
  if (x.b != y.b) return x.b < y.b;
  return x.index < y.index;
}

void LoadRanking::Update(size_t candidate, const UnitLoad& load) {
  if (candidate >= size_) return;
  const LoadKey key = LeastLoadedKey(load, phase_);
  const Node leaf{key.first, key.second, load.available ? static_cast<int32_t>(candidate) : -1};
  size_t i = leaves_ + candidate;
  Node& old = tree_[i];
  if (old.index == leaf.index && old.a == leaf.a && old.b == leaf.b) return;  // most updates
  old = leaf;
  for (i /= 2; i >= 1; i /= 2) {
    const Node& l = tree_[2 * i];
    const Node& r = tree_[2 * i + 1];
    const Node w = Beats(r, l) ? r : l;
    Node& p = tree_[i];
    // An unchanged winner leaves everything above it unchanged too.
    if (p.index == w.index && p.a == w.a && p.b == w.b) break;
    p = w;
  }
}

}  // namespace myriad::policy
