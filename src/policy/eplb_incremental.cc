#include "policy/eplb_incremental.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

namespace myriad::policy {

absl::StatusOr<ReplaceMode> ParseReplaceMode(std::string_view name) {
  if (name == "incremental") return ReplaceMode::kIncremental;
  if (name == "full") return ReplaceMode::kFull;
  return absl::InvalidArgumentError(
      fmt::format("re-placement mode '{}' is not one of incremental, full", std::string(name)));
}

std::string_view ReplaceModeName(ReplaceMode mode) {
  return mode == ReplaceMode::kIncremental ? "incremental" : "full";
}

void RebuildLog2Phy(EplbPlacement* p) {
  const auto layers = static_cast<size_t>(p->layers), logical = static_cast<size_t>(p->logical_experts);
  const auto physical = static_cast<size_t>(p->physical_experts);
  p->logcnt.assign(layers * logical, 0);
  for (size_t l = 0; l < layers; ++l) {
    for (size_t q = 0; q < physical; ++q) {
      const int32_t e = p->phy2log[l * physical + q];
      if (e >= 0) ++p->logcnt[l * logical + static_cast<size_t>(e)];
    }
  }
  p->max_replicas = p->logcnt.empty() ? 0 : *std::max_element(p->logcnt.begin(), p->logcnt.end());
  const auto maxr = static_cast<size_t>(p->max_replicas);
  p->log2phy.assign(layers * logical * maxr, -1);
  std::vector<size_t> next(logical);
  for (size_t l = 0; l < layers; ++l) {
    std::fill(next.begin(), next.end(), 0);
    for (size_t q = 0; q < physical; ++q) {
      const int32_t e = p->phy2log[l * physical + q];
      if (e < 0) continue;
      p->log2phy[(l * logical + static_cast<size_t>(e)) * maxr + next[static_cast<size_t>(e)]++] =
          static_cast<int32_t>(q);
    }
  }
}

namespace {

bool Holds(const int32_t* gpu_slots, size_t per_gpu, int32_t e) {
  return std::find(gpu_slots, gpu_slots + per_gpu, e) != gpu_slots + per_gpu;
}

// Fetches of one layer: slots of `after` (on live GPUs) whose expert `before` did not put on
// that GPU.
int64_t LayerFetches(const int32_t* before, const int32_t* after, size_t gpus, size_t per_gpu,
                     std::span<const uint8_t> dead, int64_t* incoming) {
  int64_t n = 0;
  for (size_t g = 0; g < gpus; ++g) {
    if (!dead.empty() && dead[g] != 0) continue;
    for (size_t s = 0; s < per_gpu; ++s) {
      const int32_t e = after[g * per_gpu + s];
      if (e < 0 || Holds(before + g * per_gpu, per_gpu, e)) continue;
      ++n;
      if (incoming != nullptr) ++incoming[g];
    }
  }
  return n;
}

constexpr double kNone = -std::numeric_limits<double>::infinity();
// The search offers the hottest GPU's experts to this many of the lightest GPUs only (all of
// them up to 257 GPUs; fewer lost swaps that a unit of 144 GPUs needed), and takes its slots' new
// experts from this many of the experts with the lightest next copy, plus what it held before.
constexpr size_t kDestinations = 256;
constexpr size_t kLightExperts = 8;

// The greedy search of one layer, with its buffers reused from layer to layer.
class LayerSearch {
 public:
  LayerSearch(int logical, int gpus, int per_gpu, std::span<const uint8_t> dead, const IncrementalOptions& o)
      : logical_(static_cast<size_t>(logical)),
        gpus_(static_cast<size_t>(gpus)),
        per_(static_cast<size_t>(per_gpu)),
        dead_(dead),
        o_(o),
        domain_size_(o.gpus_per_domain > 0 && gpus % o.gpus_per_domain == 0 ? static_cast<size_t>(o.gpus_per_domain)
                                                                              : gpus_),
        domains_(gpus_ / domain_size_) {
    for (uint8_t d : dead) live_ += d == 0 ? 1 : 0;
  }

  // Rewrites `row` (live slots of the running placement, dead ones -1) towards `target_ratio`
  // (max/mean); `before` is the running placement, for what counts as a fetch.
  // With `want` (copies per expert, filling the live slots), the copy counts are first set to it:
  // AdoptCounts.
  absl::Status Run(std::span<const double> w, const int32_t* before, std::vector<int32_t>& row, double target_ratio,
                   const std::vector<int>* want = nullptr) {
    w_ = w;
    before_ = before;
    row_ = &row;
    copies_.assign(logical_, 0);
    in_domain_.assign(logical_ * domains_, 0);
    for (size_t q = 0; q < row.size(); ++q) {
      if (row[q] >= 0) Count(row[q], q / per_, +1);
    }
    double total = 0;
    for (size_t e = 0; e < logical_; ++e) total += w_[e];
    const double mean = total / static_cast<double>(live_);
    if (want != nullptr) AdoptCounts(*want);
    if (absl::Status st = AddMissingCopies(); !st.ok()) return st;
    const double target = target_ratio * mean;
    const double min_gain = 1e-9 * mean;
    double spent = 0;
    const size_t max_steps = 4 * gpus_ * per_ + logical_;
    for (size_t step = 0; step < max_steps; ++step) {
      Refresh();
      const size_t h = Hottest();
      if (load_[h] <= target || total <= 0) break;
      if (o_.max_fetches_per_layer > 0 && spent >= static_cast<double>(o_.max_fetches_per_layer)) break;
      const Move m = BestMove(h, min_gain);
      if (m.kind == Move::kNone) break;
      Apply(m);
      spent += m.cost;
    }
    return absl::OkStatus();
  }

 private:
  struct Move {
    enum Kind { kNone, kReplace, kSwap } kind = kNone;
    size_t slot = 0, other = 0;  // kReplace: slot takes expert; kSwap: slot <-> other
    int32_t expert = -1;
    double cost = 0;
  };

  bool Live(size_t g) const { return dead_.empty() || dead_[g] == 0; }
  double Share(int32_t e) const {
    const int c = copies_[static_cast<size_t>(e)];
    return c > 0 ? w_[static_cast<size_t>(e)] / c : 0.0;
  }
  double ShareWith(int32_t e, int copies) const { return w_[static_cast<size_t>(e)] / copies; }
  const int32_t* Gpu(size_t g) const { return row_->data() + g * per_; }
  bool HeldBefore(size_t g, int32_t e) const { return Holds(before_ + g * per_, per_, e); }
  double FetchCost(size_t g, int32_t e) const { return HeldBefore(g, e) ? 0.0 : 1.0; }

  void Count(int32_t e, size_t g, int delta) {
    copies_[static_cast<size_t>(e)] += delta;
    in_domain_[static_cast<size_t>(e) * domains_ + g / domain_size_] += delta;
  }
  // Whether one more copy of e may go to g's domain when e will have `copies` in all.
  bool DomainAllows(int32_t e, size_t g, int copies) const {
    if (domains_ <= 1) return true;
    const int cap = (copies + static_cast<int>(domains_) - 1) / static_cast<int>(domains_);
    return in_domain_[static_cast<size_t>(e) * domains_ + g / domain_size_] + 1 <= cap;
  }

  // Loads of the live GPUs and, per expert, its three most loaded holders (ties: lower GPU).
  void Refresh() {
    load_.assign(gpus_, 0.0);
    top_gpu_.assign(logical_ * 3, -1);
    for (size_t g = 0; g < gpus_; ++g) {
      if (!Live(g)) continue;
      for (size_t s = 0; s < per_; ++s) {
        const int32_t e = Gpu(g)[s];
        if (e >= 0) load_[g] += Share(e);
      }
    }
    for (size_t g = 0; g < gpus_; ++g) {
      if (!Live(g)) continue;
      for (size_t s = 0; s < per_; ++s) {
        const int32_t e = Gpu(g)[s];
        if (e < 0) continue;
        int* top = &top_gpu_[static_cast<size_t>(e) * 3];
        if (top[0] == static_cast<int>(g) || top[1] == static_cast<int>(g) || top[2] == static_cast<int>(g)) continue;
        for (int k = 0; k < 3; ++k) {
          if (top[k] < 0 || load_[g] > load_[static_cast<size_t>(top[k])]) {
            for (int j = 2; j > k; --j) top[j] = top[j - 1];
            top[k] = static_cast<int>(g);
            break;
          }
        }
      }
    }
  }
  // The most loaded holder of e other than GPUs a and b (kNone when there is none).
  double MaxHolderExcept(int32_t e, size_t a, size_t b) const {
    const int* top = &top_gpu_[static_cast<size_t>(e) * 3];
    for (int k = 0; k < 3; ++k) {
      if (top[k] >= 0 && static_cast<size_t>(top[k]) != a && static_cast<size_t>(top[k]) != b) {
        return load_[static_cast<size_t>(top[k])];
      }
    }
    return kNone;
  }
  size_t Hottest() const {
    size_t h = gpus_;
    for (size_t g = 0; g < gpus_; ++g) {
      if (Live(g) && (h == gpus_ || load_[g] > load_[h])) h = g;
    }
    return h;
  }

  // Every expert with fewer live copies than min_copies (an orphan first of all) gets copies,
  // heaviest expert first, each in the slot whose change leaves the touched GPUs least loaded.
  absl::Status AddMissingCopies() {
    for (int round = 1; round <= o_.min_copies; ++round) {
      for (;;) {
        int32_t e = -1;
        for (size_t x = 0; x < logical_; ++x) {
          if (copies_[x] < round && (e < 0 || w_[x] > w_[static_cast<size_t>(e)])) e = static_cast<int32_t>(x);
        }
        if (e < 0) break;
        Refresh();
        size_t best = row_->size();
        double best_max = std::numeric_limits<double>::infinity();
        for (int pass = 0; pass < 2 && best == row_->size(); ++pass) {
          for (size_t g = 0; g < gpus_; ++g) {
            if (!Live(g) || Holds(Gpu(g), per_, e)) continue;
            if (pass == 0 && !DomainAllows(e, g, copies_[static_cast<size_t>(e)] + 1)) continue;
            for (size_t s = 0; s < per_; ++s) {
              // An empty slot on a live GPU (the running placement had none there) is free.
              const int32_t y = Gpu(g)[s];
              const double add = ShareWith(e, copies_[static_cast<size_t>(e)] + 1);
              if (y < 0) {
                if (load_[g] + add < best_max) best_max = load_[g] + add, best = g * per_ + s;
                continue;
              }
              if (copies_[static_cast<size_t>(y)] <= o_.min_copies) continue;
              const int cy = copies_[static_cast<size_t>(y)];
              const double up = ShareWith(y, cy - 1) - ShareWith(y, cy);
              const double m = std::max(load_[g] - Share(y) + add, MaxHolderExcept(y, g, g) + up);
              if (m < best_max) best_max = m, best = g * per_ + s;
            }
          }
        }
        if (best == row_->size()) {
          return absl::InvalidArgumentError(fmt::format(
              "incremental re-placement: no slot left for copy {} of expert {} ({} live GPUs of {} slots)", round, e,
              live_, per_));
        }
        Apply(Move{Move::kReplace, best, 0, e, 0});
      }
    }
    return absl::OkStatus();
  }

  // Gives every expert `want` copies while keeping every slot whose expert is still wanted there:
  // an expert with too many copies loses those on the most loaded GPUs, and the slots so freed
  // take the missing copies, the heaviest (load per copy) first, each on the lightest GPU with a
  // free slot (EPLB's packing, over the freed slots only).
  void AdoptCounts(const std::vector<int>& want) {
    std::vector<int32_t>& row = *row_;
    Refresh();
    std::vector<size_t>& slots = scratch_slots_;
    for (size_t e = 0; e < logical_; ++e) {
      const int surplus = copies_[e] - want[e];
      if (surplus <= 0) continue;
      slots.clear();
      for (size_t q = 0; q < row.size(); ++q) {
        if (row[q] == static_cast<int32_t>(e)) slots.push_back(q);
      }
      std::stable_sort(slots.begin(), slots.end(), [&](size_t a, size_t b) { return load_[a / per_] > load_[b / per_]; });
      for (int k = 0; k < surplus; ++k) {
        Count(static_cast<int32_t>(e), slots[static_cast<size_t>(k)] / per_, -1);
        row[slots[static_cast<size_t>(k)]] = -1;
      }
    }
    // Loads with every expert at its wanted count; a free slot adds nothing yet.
    std::vector<double>& load = load_;
    std::fill(load.begin(), load.end(), 0.0);
    std::vector<int>& free_slots = free_count_;
    free_slots.assign(gpus_, 0);
    for (size_t q = 0; q < row.size(); ++q) {
      if (!Live(q / per_)) continue;
      if (row[q] >= 0) {
        load[q / per_] += ShareWith(row[q], want[static_cast<size_t>(row[q])]);
      } else {
        ++free_slots[q / per_];
      }
    }
    std::vector<int32_t>& adds = scratch_adds_;
    adds.clear();
    for (size_t e = 0; e < logical_; ++e) {
      for (int k = copies_[e]; k < want[e]; ++k) adds.push_back(static_cast<int32_t>(e));
    }
    std::stable_sort(adds.begin(), adds.end(), [&](int32_t a, int32_t b) {
      return ShareWith(a, want[static_cast<size_t>(a)]) > ShareWith(b, want[static_cast<size_t>(b)]);
    });
    for (const int32_t e : adds) {
      size_t best = gpus_;
      for (int pass = 0; pass < 2 && best == gpus_; ++pass) {
        for (size_t g = 0; g < gpus_; ++g) {
          if (!Live(g) || free_slots[g] == 0 || Holds(Gpu(g), per_, e)) continue;
          if (pass == 0 && !DomainAllows(e, g, copies_[static_cast<size_t>(e)] + 1)) continue;
          // Taking back an expert the GPU held before costs nothing: prefer it among equals.
          if (best == gpus_ || load[g] < load[best] || (load[g] == load[best] && HeldBefore(g, e) && !HeldBefore(best, e))) {
            best = g;
          }
        }
      }
      if (best == gpus_) {  // only GPUs already holding e have room: a second copy there
        for (size_t g = 0; g < gpus_ && best == gpus_; ++g) {
          if (Live(g) && free_slots[g] > 0) best = g;
        }
      }
      if (best == gpus_) break;  // cannot happen: the wanted copies fill the live slots
      size_t q = best * per_;
      while (row[q] >= 0) ++q;
      row[q] = e;
      Count(e, best, +1);
      --free_slots[best];
      load[best] += ShareWith(e, want[static_cast<size_t>(e)]);
    }
  }

  // The slot change that lowers the hottest GPU h the most per expert fetched while leaving
  // every GPU it touches below h's load now.
  Move BestMove(size_t h, double min_gain) {
    const double lh = load_[h];
    Move best;
    double best_score = 0;
    const auto consider = [&](double new_max, double cost, const Move& m) {
      const double gain = lh - new_max;
      if (gain <= min_gain) return;
      const double score = gain / std::max(cost, 0.25);
      if (score > best_score) best_score = score, best = m, best.cost = cost;
    };
    const int32_t* hs = Gpu(h);
    Candidates(h);
    // What h holds and held before, by expert: the inner loops' lookups.
    on_h_.resize(logical_, 0);
    before_h_.resize(logical_, 0);
    for (size_t t = 0; t < per_; ++t) {
      if (hs[t] >= 0) on_h_[static_cast<size_t>(hs[t])] = 1;
      if (before_[h * per_ + t] >= 0) before_h_[static_cast<size_t>(before_[h * per_ + t])] = 1;
    }
    for (size_t sh = 0; sh < per_; ++sh) {
      const int32_t x = hs[sh];
      if (x < 0) continue;
      const int cx = copies_[static_cast<size_t>(x)];
      const double sx = Share(x);
      // h's slot goes to another expert b: x loses a copy, b gains one.
      if (cx > o_.min_copies) {
        const double others = MaxHolderExcept(x, h, h) + (ShareWith(x, cx - 1) - sx);
        if (others < lh - min_gain) {
          const auto offer = [&](int32_t eb) {
            if (eb < 0 || eb == x || on_h_[static_cast<size_t>(eb)] != 0) return false;
            const int cb = copies_[static_cast<size_t>(eb)];
            if (!DomainAllows(eb, h, cb + 1)) return false;
            consider(std::max(lh - sx + ShareWith(eb, cb + 1), others), before_h_[static_cast<size_t>(eb)] != 0 ? 0.0 : 1.0,
                     Move{Move::kReplace, h * per_ + sh, 0, eb, 0});
            return true;
          };
          // The lightest next copies, and what h held before (free to take back).
          bool offered = false;
          for (int32_t eb : light_) offered = offer(eb) || offered;
          for (size_t t = 0; t < per_; ++t) offer(before_[h * per_ + t]);
          for (size_t b = 0; b < logical_ && !offered; ++b) offered = offer(static_cast<int32_t>(b));
        }
      }
      // Another GPU g takes x: a new copy in one of its slots, or a swap with a lighter expert.
      const double down = sx - ShareWith(x, cx + 1);
      for (const size_t g : dest_) {
        if (g == h || Holds(Gpu(g), per_, x)) continue;
        const bool replicate_ok = DomainAllows(x, g, cx + 1);
        const bool swap_ok = g / domain_size_ == h / domain_size_ || DomainAllows(x, g, cx);
        const double cost_x = FetchCost(g, x);
        for (size_t s = 0; s < per_; ++s) {
          const int32_t y = Gpu(g)[s];
          if (y < 0 || y == x) continue;
          const int cy = copies_[static_cast<size_t>(y)];
          const double sy = Share(y);
          const bool h_holds_y = on_h_[static_cast<size_t>(y)] != 0;
          if (replicate_ok && cy > o_.min_copies) {
            const double up = ShareWith(y, cy - 1) - sy;
            const double nh = lh - down + (h_holds_y ? up : 0.0);
            const double ng = load_[g] - sy + ShareWith(x, cx + 1);
            consider(std::max({nh, ng, MaxHolderExcept(y, g, h) + up}), cost_x,
                     Move{Move::kReplace, g * per_ + s, 0, x, 0});
          }
          if (swap_ok && !h_holds_y && sy < sx &&
              (g / domain_size_ == h / domain_size_ || DomainAllows(y, h, cy))) {
            consider(std::max(lh - sx + sy, load_[g] + sx - sy), cost_x + (before_h_[static_cast<size_t>(y)] != 0 ? 0.0 : 1.0),
                     Move{Move::kSwap, h * per_ + sh, g * per_ + s, -1, 0});
          }
        }
      }
    }
    for (size_t t = 0; t < per_; ++t) {
      if (hs[t] >= 0) on_h_[static_cast<size_t>(hs[t])] = 0;
      if (before_[h * per_ + t] >= 0) before_h_[static_cast<size_t>(before_[h * per_ + t])] = 0;
    }
    return best;
  }

  // dest_: the live GPUs other than h, or the kDestinations lightest of them (in GPU order);
  // light_: the kLightExperts experts whose next copy would be lightest (ties: lower index).
  void Candidates(size_t h) {
    dest_.clear();
    for (size_t g = 0; g < gpus_; ++g) {
      if (g != h && Live(g)) dest_.push_back(g);
    }
    if (dest_.size() > kDestinations) {
      const auto lighter = [&](size_t a, size_t b) { return load_[a] < load_[b] || (load_[a] == load_[b] && a < b); };
      std::nth_element(dest_.begin(), dest_.begin() + kDestinations, dest_.end(), lighter);
      dest_.resize(kDestinations);
      std::sort(dest_.begin(), dest_.end());
    }
    light_.assign(kLightExperts, -1);
    std::array<double, kLightExperts> share{};
    for (size_t b = 0; b < logical_; ++b) {
      const double v = ShareWith(static_cast<int32_t>(b), copies_[b] + 1);
      for (size_t k = 0; k < kLightExperts; ++k) {
        if (light_[k] < 0 || v < share[k]) {
          for (size_t j = kLightExperts - 1; j > k; --j) light_[j] = light_[j - 1], share[j] = share[j - 1];
          light_[k] = static_cast<int32_t>(b), share[k] = v;
          break;
        }
      }
    }
  }

  void Apply(const Move& m) {
    std::vector<int32_t>& row = *row_;
    if (m.kind == Move::kReplace) {
      const int32_t old = row[m.slot];
      if (old >= 0) Count(old, m.slot / per_, -1);
      row[m.slot] = m.expert;
      Count(m.expert, m.slot / per_, +1);
    } else if (m.kind == Move::kSwap) {
      const int32_t a = row[m.slot], b = row[m.other];
      Count(a, m.slot / per_, -1), Count(b, m.other / per_, -1);
      std::swap(row[m.slot], row[m.other]);
      Count(b, m.slot / per_, +1), Count(a, m.other / per_, +1);
    }
  }

  const size_t logical_, gpus_, per_;
  std::span<const uint8_t> dead_;
  const IncrementalOptions& o_;
  const size_t domain_size_, domains_;
  int live_ = 0;
  std::span<const double> w_;
  const int32_t* before_ = nullptr;
  std::vector<int32_t>* row_ = nullptr;
  std::vector<int> copies_, in_domain_, top_gpu_;
  std::vector<size_t> dest_, scratch_slots_;
  std::vector<int32_t> scratch_adds_;
  std::vector<int> free_count_;
  std::vector<uint8_t> on_h_, before_h_;
  std::vector<int32_t> light_;
  std::vector<double> load_;
};

absl::Status CheckShape(const EplbPlacement& p, const char* what) {
  if (p.num_gpus < 1 || p.layers < 1 || p.logical_experts < 1 || p.physical_experts % p.num_gpus != 0 ||
      p.phy2log.size() != static_cast<size_t>(p.layers) * static_cast<size_t>(p.physical_experts)) {
    return absl::InvalidArgumentError(fmt::format("incremental re-placement: the {} placement is malformed", what));
  }
  return absl::OkStatus();
}

}  // namespace

double LayerImbalance(std::span<const double> layer_weight, std::span<const int32_t> row, int per_gpu,
                      std::span<const uint8_t> dead) {
  std::vector<double> load(row.size() / static_cast<size_t>(std::max(per_gpu, 1)));
  LayerGpuLoads(layer_weight, row, per_gpu, dead, load);
  return MaxOverMean(load, dead);
}

int64_t CountFetchedSlots(const EplbPlacement& before, const EplbPlacement& after, std::vector<int64_t>* incoming) {
  const auto gpus = static_cast<size_t>(std::max(after.num_gpus, 0));
  if (incoming != nullptr) incoming->assign(gpus, 0);
  const auto physical = static_cast<size_t>(after.physical_experts);
  if (before.physical_experts != after.physical_experts || before.layers != after.layers || gpus == 0 ||
      before.phy2log.size() != after.phy2log.size()) {
    return 0;
  }
  int64_t n = 0;
  for (size_t l = 0; l < static_cast<size_t>(after.layers); ++l) {
    n += LayerFetches(&before.phy2log[l * physical], &after.phy2log[l * physical], gpus, physical / gpus, {},
                      incoming != nullptr ? incoming->data() : nullptr);
  }
  return n;
}

absl::StatusOr<IncrementalReplacement> ReplaceIncrementally(std::span<const double> weight,
                                                            const EplbPlacement& current,
                                                            std::span<const int> failed_gpus,
                                                            const EplbPlacement& reference,
                                                            const IncrementalOptions& options) {
  if (absl::Status st = CheckShape(current, "current"); !st.ok()) return st;
  if (absl::Status st = CheckShape(reference, "reference"); !st.ok()) return st;
  if (reference.layers != current.layers || reference.logical_experts != current.logical_experts ||
      reference.physical_experts != current.physical_experts || reference.num_gpus != current.num_gpus) {
    return absl::InvalidArgumentError("incremental re-placement: the reference's shape differs from the current one's");
  }
  const auto layers = static_cast<size_t>(current.layers), logical = static_cast<size_t>(current.logical_experts);
  const auto physical = static_cast<size_t>(current.physical_experts), gpus = static_cast<size_t>(current.num_gpus);
  const size_t per = physical / gpus;
  if (weight.size() != layers * logical) {
    return absl::InvalidArgumentError(
        fmt::format("incremental re-placement: {} loads for {} layers x {} experts", weight.size(), layers, logical));
  }
  for (double x : weight) {
    if (!(x >= 0 && std::isfinite(x))) {
      return absl::InvalidArgumentError("incremental re-placement: loads must be finite and non-negative");
    }
  }
  if (options.min_copies < 1 || !(options.tolerance >= 0)) {
    return absl::InvalidArgumentError("incremental re-placement: min_copies must be >= 1 and tolerance >= 0");
  }
  std::vector<uint8_t> dead(gpus, 0);
  for (int g : failed_gpus) {
    if (g < 0 || static_cast<size_t>(g) >= gpus) {
      return absl::InvalidArgumentError(fmt::format("incremental re-placement: failed GPU {} is not in [0, {})", g, gpus));
    }
    dead[static_cast<size_t>(g)] = 1;
  }
  const auto live = static_cast<int64_t>(std::count(dead.begin(), dead.end(), uint8_t{0}));
  if (live * static_cast<int64_t>(per) < int64_t{options.min_copies} * static_cast<int64_t>(logical)) {
    return absl::InvalidArgumentError(fmt::format("incremental re-placement: {} live GPUs of {} slots cannot hold {} copies of {} experts",
                                                  live, per, options.min_copies, logical));
  }
  IncrementalReplacement out;
  out.placement = current;
  out.placement.hierarchical = false;
  out.incoming.assign(gpus, 0);
  LayerSearch search(current.logical_experts, current.num_gpus, static_cast<int>(per), dead, options);
  std::vector<int32_t> row(physical), ref_row(physical), start_row(physical), alt_row(physical);
  std::vector<int> ref_copies(logical);
  std::vector<int64_t> scratch(gpus);
  for (size_t l = 0; l < layers; ++l) {
    const int32_t* before = &current.phy2log[l * physical];
    const std::span<const double> w = weight.subspan(l * logical, logical);
    for (size_t q = 0; q < physical; ++q) {
      const int32_t e = before[q];
      if (dead[q / per] == 0 && (e < -1 || e >= static_cast<int32_t>(logical))) {
        return absl::InvalidArgumentError(fmt::format("incremental re-placement: layer {} slot {} holds expert {}", l, q, e));
      }
      row[q] = dead[q / per] != 0 ? -1 : before[q];
      const int32_t r = reference.phy2log[l * physical + q];
      ref_row[q] = dead[q / per] != 0 ? -1 : r;
    }
    std::fill(ref_copies.begin(), ref_copies.end(), 0);
    for (int32_t r : ref_row) {
      if (r >= static_cast<int32_t>(logical) || r < -1) {
        return absl::InvalidArgumentError(fmt::format("incremental re-placement: reference layer {} names expert {}", l, r));
      }
      if (r >= 0) ++ref_copies[static_cast<size_t>(r)];
    }
    if (std::find(ref_copies.begin(), ref_copies.end(), 0) != ref_copies.end()) {
      return absl::InvalidArgumentError(fmt::format("incremental re-placement: reference layer {} leaves an expert without a live copy", l));
    }
    const double ref_ratio = LayerImbalance(w, ref_row, static_cast<int>(per), dead);
    const double target = (1 + options.tolerance) * ref_ratio;
    // First from the running placement as it is; where that stops short of the target, again
    // with the reference's copy counts adopted first; else the reference itself.
    std::copy(row.begin(), row.end(), start_row.begin());
    if (absl::Status st = search.Run(w, before, row, target); !st.ok()) return st;
    double got = LayerImbalance(w, row, static_cast<int>(per), dead);
    int64_t fetched = LayerFetches(before, row.data(), gpus, per, dead, nullptr);
    const int64_t ref_fetched = LayerFetches(before, ref_row.data(), gpus, per, dead, nullptr);
    const auto reached = [&](double ratio) { return ratio <= target * (1 + 1e-12); };
    const bool budget_stopped = options.max_fetches_per_layer > 0 && fetched >= options.max_fetches_per_layer;
    if (!reached(got) && !budget_stopped) {
      alt_row = start_row;
      if (absl::Status st = search.Run(w, before, alt_row, target, &ref_copies); !st.ok()) return st;
      const double alt_got = LayerImbalance(w, alt_row, static_cast<int>(per), dead);
      const int64_t alt_fetched = LayerFetches(before, alt_row.data(), gpus, per, dead, nullptr);
      if (reached(alt_got) && alt_fetched <= ref_fetched) {
        row.swap(alt_row);
        got = alt_got;
        fetched = alt_fetched;
      }
    }
    if ((!reached(got) && !budget_stopped) || fetched > ref_fetched) {
      row = ref_row;
      ++out.reference_layers;
    }
    std::fill(scratch.begin(), scratch.end(), 0);
    LayerFetches(before, row.data(), gpus, per, dead, scratch.data());
    for (size_t g = 0; g < gpus; ++g) {
      out.incoming[g] += scratch[g];
      out.moved_slots += scratch[g];
    }
    std::copy(row.begin(), row.end(), out.placement.phy2log.begin() + static_cast<std::ptrdiff_t>(l * physical));
  }
  RebuildLog2Phy(&out.placement);
  return out;
}

}  // namespace myriad::policy
