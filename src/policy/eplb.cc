#include "policy/eplb.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <limits>
#include <numeric>
#include <string>
#include <utility>

#include "absl/status/status.h"

namespace myriad::policy {

namespace {

// Loads are non-negative floats and never -0 (the inputs are normalized), so their bit patterns
// order as their values do, and a (load, index) pair packs into one integer that orders as the
// pair: comparisons become single integer compares and the sorts can be radix sorts.
uint32_t Bits(float v) { return std::bit_cast<uint32_t>(v); }
uint64_t Key(uint32_t high, size_t index) {
  return (uint64_t{high} << 32) | static_cast<uint32_t>(index);
}
uint32_t Index(uint64_t key) { return static_cast<uint32_t>(key); }

// Where eplb.py scans every pack (or expert) for the lightest (or heaviest) one, we keep them in a
// binary min-heap of keys whose low half is the index: the index breaks ties exactly as the scan
// does, so the top of the heap is always the element the scan would return.
void SiftDown(std::vector<uint64_t>& h, size_t size, size_t i) {
  const uint64_t x = h[i];
  for (;;) {
    size_t c = 2 * i + 1;
    if (c >= size) break;
    if (c + 1 < size) c += h[c + 1] < h[c] ? 1 : 0;
    if (x <= h[c]) break;
    h[i] = h[c];
    i = c;
  }
  h[i] = x;
}

// Below this many candidates a linear scan beats a heap.
constexpr int kScanLimit = 16;

// The smallest key, without branches (std::min_element's are unpredictable here).
uint64_t MinKey(const std::vector<uint64_t>& keys) {
  uint64_t best = ~uint64_t{0};
  for (uint64_t k : keys) best = std::min(best, k);
  return best;
}

// Buffers reused across layers and nodes, so a rebalance allocates only up front.
struct Workspace {
  std::vector<uint64_t> sorted, scratch, heap;
  std::vector<uint32_t> histogram;
  std::vector<int32_t> count;
  std::vector<float> pack_load;
  // Step 1: groups onto nodes.
  std::vector<float> group_load;
  std::vector<int32_t> group_pack, group_rank, log2mlog, mlog2log;
  // Step 2: replicas within a node.
  std::vector<float> mlog_load, phy_load;
  std::vector<int32_t> phy2mlog, phy_rank, mlog_count, node_mlog_count;
  // Step 3: replicas onto the node's GPUs.
  std::vector<int32_t> pack, rank;
};

// Sorts keys whose low halves ascend by their high halves, keeping equal high halves in input
// order: an LSD radix sort in passes of kBits, skipping the passes whose digit never varies
// (loads of one magnitude share their exponent bits).
template <int kBits>
void RadixSortByHigh(std::vector<uint64_t>& keys, Workspace& ws) {
  constexpr size_t kBuckets = size_t{1} << kBits;
  constexpr int kPasses = (32 + kBits - 1) / kBits;
  const size_t n = keys.size();
  ws.scratch.resize(n);
  ws.histogram.assign(kPasses * kBuckets, 0);
  for (uint64_t k : keys) {
    const auto high = static_cast<uint32_t>(k >> 32);
    for (int pass = 0; pass < kPasses; ++pass) {
      ++ws.histogram[static_cast<size_t>(pass) * kBuckets +
                     ((high >> (pass * kBits)) & (kBuckets - 1))];
    }
  }
  for (int pass = 0; pass < kPasses; ++pass) {
    uint32_t* h = ws.histogram.data() + static_cast<size_t>(pass) * kBuckets;
    const int shift = 32 + pass * kBits;
    if (h[(keys[0] >> shift) & (kBuckets - 1)] == n) continue;
    uint32_t sum = 0;
    for (size_t b = 0; b < kBuckets; ++b) sum += std::exchange(h[b], sum);
    for (uint64_t k : keys) ws.scratch[h[(k >> shift) & (kBuckets - 1)]++] = k;
    keys.swap(ws.scratch);
  }
}

// eplb.py's balanced_packing: items in descending load order, each into the lightest pack that
// is not yet full; every pack takes exactly n / num_packs items. Loads add up in float32, as the
// torch scalars do. With one item per pack eplb.py skips the greedy pass and keeps item i in
// pack i, and so do we (the greedy pass would order them by load instead).
void BalancedPacking(std::span<const float> load, int num_packs, std::span<int32_t> pack,
                     std::span<int32_t> rank, EplbTies ties, Workspace& ws) {
  const size_t n = load.size();
  const auto per_pack = static_cast<int32_t>(n / static_cast<size_t>(num_packs));
  if (per_pack == 1) {
    std::iota(pack.begin(), pack.end(), 0);
    std::fill(rank.begin(), rank.end(), 0);
    return;
  }
  ws.sorted.resize(n);
  if (ties == EplbTies::kStable) {
    // Inverted load bits ascend as loads descend; the index then orders equal loads.
    for (size_t i = 0; i < n; ++i) ws.sorted[i] = Key(~Bits(load[i]), i);
    if (n >= 1024) {
      RadixSortByHigh<11>(ws.sorted, ws);
    } else if (n >= 32) {
      RadixSortByHigh<8>(ws.sorted, ws);
    } else {
      std::sort(ws.sorted.begin(), ws.sorted.end());
    }
  } else {
    // What torch's CPU sort does: std::sort over (load, index) pairs in index order, comparing
    // loads only.
    for (size_t i = 0; i < n; ++i) ws.sorted[i] = Key(Bits(load[i]), i);
    std::sort(ws.sorted.begin(), ws.sorted.end(),
              [](uint64_t a, uint64_t b) { return (a >> 32) > (b >> 32); });
  }

  ws.count.assign(static_cast<size_t>(num_packs), 0);
  ws.pack_load.assign(static_cast<size_t>(num_packs), 0.0f);
  if (num_packs <= kScanLimit) {
    // Few packs: scan them as eplb.py does; a full pack's key is the largest there is.
    ws.heap.resize(static_cast<size_t>(num_packs));
    for (size_t p = 0; p < ws.heap.size(); ++p) ws.heap[p] = Key(0, p);
    for (const uint64_t item : ws.sorted) {
      const size_t i = Index(item);
      const size_t p = Index(MinKey(ws.heap));
      pack[i] = static_cast<int32_t>(p);
      rank[i] = ws.count[p]++;
      ws.pack_load[p] += load[i];
      ws.heap[p] = ws.count[p] == per_pack ? ~uint64_t{0} : Key(Bits(ws.pack_load[p]), p);
    }
    return;
  }
  // All packs start empty at load 0: in index order they already form a heap.
  size_t live = static_cast<size_t>(num_packs);
  ws.heap.resize(live);
  for (size_t p = 0; p < live; ++p) ws.heap[p] = Key(0, p);
  for (const uint64_t item : ws.sorted) {
    const size_t i = Index(item);
    const size_t p = Index(ws.heap[0]);
    pack[i] = static_cast<int32_t>(p);
    rank[i] = ws.count[p]++;
    ws.pack_load[p] += load[i];
    if (ws.count[p] == per_pack) {  // full: leaves the heap
      ws.heap[0] = ws.heap[--live];
      if (live == 0) break;
    } else {
      ws.heap[0] = Key(Bits(ws.pack_load[p]), p);
    }
    SiftDown(ws.heap, live, 0);
  }
}

// eplb.py's replicate_experts for one row: experts 0..m-1 keep physical slots 0..m-1, and each
// further slot replicates the expert with the highest load per replica (float32 quotient), the
// lowest-indexed one among equals. With min_copies > 1 (not in eplb.py: elastic EP's fault
// tolerance) every expert first gets that many copies, slots k*m..k*m+m-1 holding copy k.
void ReplicateExperts(std::span<const float> load, size_t num_phy, Workspace& ws, int min_copies = 1) {
  const size_t m = load.size();
  ws.phy2mlog.resize(num_phy);
  ws.phy_rank.resize(num_phy);
  const size_t base = m * static_cast<size_t>(min_copies);
  ws.mlog_count.assign(m, min_copies);
  for (size_t i = 0; i < base; ++i) {
    ws.phy2mlog[i] = static_cast<int32_t>(i % m), ws.phy_rank[i] = static_cast<int32_t>(i / m);
  }
  if (num_phy == base) return;
  ws.heap.resize(m);
  for (size_t i = 0; i < m; ++i) {
    ws.heap[i] = Key(~Bits(min_copies == 1 ? load[i] : load[i] / static_cast<float>(min_copies)), i);
  }
  if (num_phy - base <= kScanLimit) {
    // Few replicas to add: scan for the heaviest, as eplb.py does.
    for (size_t i = base; i < num_phy; ++i) {
      const size_t e = Index(MinKey(ws.heap));
      ws.phy2mlog[i] = static_cast<int32_t>(e);
      ws.phy_rank[i] = ws.mlog_count[e]++;
      ws.heap[e] = Key(~Bits(load[e] / static_cast<float>(ws.mlog_count[e])), e);
    }
    return;
  }
  for (size_t i = m / 2; i-- > 0;) SiftDown(ws.heap, m, i);
  for (size_t i = base; i < num_phy; ++i) {
    const size_t e = Index(ws.heap[0]);
    ws.phy2mlog[i] = static_cast<int32_t>(e);
    ws.phy_rank[i] = ws.mlog_count[e]++;
    ws.heap[0] = Key(~Bits(load[e] / static_cast<float>(ws.mlog_count[e])), e);
    SiftDown(ws.heap, m, 0);
  }
}

struct Shape {
  int logical, physical, groups, nodes, gpus;
  int min_copies = 1;
};

// eplb.py's rebalance_experts_hierarchical for one layer (the global policy is this with one group
// and one node). Writes the layer's phy2log, replica ranks and logcnt.
void RebalanceLayer(std::span<const float> w, const Shape& s, EplbTies ties,
                    std::span<int32_t> phy2log, std::span<int32_t> phy_rank,
                    std::span<int32_t> logcnt, Workspace& ws) {
  const auto group_size = static_cast<size_t>(s.logical / s.groups);
  const auto groups_per_node = static_cast<size_t>(s.groups / s.nodes);
  const auto log_per_node = static_cast<size_t>(s.logical / s.nodes);
  const auto phy_per_node = static_cast<size_t>(s.physical / s.nodes);
  const auto phy_per_gpu = static_cast<size_t>(s.physical / s.gpus);
  const int gpus_per_node = s.gpus / s.nodes;
  const auto groups = static_cast<size_t>(s.groups);

  // Step 1: pack the groups onto nodes; "mlog" numbers the experts node by node.
  ws.group_load.resize(groups);
  ws.group_pack.resize(groups);
  ws.group_rank.resize(groups);
  if (groups_per_node > 1) {
    for (size_t g = 0; g < groups; ++g) {
      double sum = 0;
      for (size_t j = 0; j < group_size; ++j) sum += w[g * group_size + j];
      ws.group_load[g] = static_cast<float>(sum);
    }
  }
  BalancedPacking(ws.group_load, s.nodes, ws.group_pack, ws.group_rank, ties, ws);
  ws.log2mlog.resize(static_cast<size_t>(s.logical));
  ws.mlog2log.resize(static_cast<size_t>(s.logical));
  for (size_t g = 0; g < groups; ++g) {
    const size_t base = (static_cast<size_t>(ws.group_pack[g]) * groups_per_node +
                         static_cast<size_t>(ws.group_rank[g])) *
                        group_size;
    for (size_t j = 0; j < group_size; ++j) {
      ws.log2mlog[g * group_size + j] = static_cast<int32_t>(base + j);
      ws.mlog2log[base + j] = static_cast<int32_t>(g * group_size + j);
    }
  }

  ws.node_mlog_count.resize(static_cast<size_t>(s.logical));
  ws.mlog_load.resize(log_per_node);
  ws.phy_load.resize(phy_per_node);
  ws.pack.resize(phy_per_node);
  ws.rank.resize(phy_per_node);
  for (size_t node = 0; node < static_cast<size_t>(s.nodes); ++node) {
    const size_t mlog0 = node * log_per_node;
    // Step 2: replicas within the node.
    for (size_t k = 0; k < log_per_node; ++k) {
      ws.mlog_load[k] = w[static_cast<size_t>(ws.mlog2log[mlog0 + k])];
    }
    ReplicateExperts(ws.mlog_load, phy_per_node, ws, s.min_copies);
    for (size_t k = 0; k < log_per_node; ++k) ws.node_mlog_count[mlog0 + k] = ws.mlog_count[k];
    // Step 3: pack the node's replicas onto its GPUs by load per replica.
    for (size_t i = 0; i < phy_per_node; ++i) {
      const auto e = static_cast<size_t>(ws.phy2mlog[i]);
      ws.phy_load[i] = ws.mlog_load[e] / static_cast<float>(ws.mlog_count[e]);
    }
    BalancedPacking(ws.phy_load, gpus_per_node, ws.pack, ws.rank, ties, ws);
    for (size_t i = 0; i < phy_per_node; ++i) {
      const size_t slot = node * phy_per_node + static_cast<size_t>(ws.pack[i]) * phy_per_gpu +
                          static_cast<size_t>(ws.rank[i]);
      phy2log[slot] = ws.mlog2log[mlog0 + static_cast<size_t>(ws.phy2mlog[i])];
      phy_rank[slot] = ws.phy_rank[i];
    }
  }
  for (size_t e = 0; e < static_cast<size_t>(s.logical); ++e) {
    logcnt[e] = ws.node_mlog_count[static_cast<size_t>(ws.log2mlog[e])];
  }
}

absl::Status Invalid(std::string message) { return absl::InvalidArgumentError(std::move(message)); }

absl::Status Validate(size_t weight_size, int layers, int logical_experts, int num_replicas,
                      int num_groups, int num_nodes, int num_gpus) {
  const std::pair<const char*, int> positive[] = {{"layers", layers},
                                                  {"logical_experts", logical_experts},
                                                  {"num_replicas", num_replicas},
                                                  {"num_groups", num_groups},
                                                  {"num_nodes", num_nodes},
                                                  {"num_gpus", num_gpus}};
  for (const auto& [name, value] : positive) {
    if (value <= 0) return Invalid(fmt::format("{} must be positive, got {}", name, value));
  }
  const int64_t expected = int64_t{layers} * logical_experts;
  if (static_cast<int64_t>(weight_size) != expected) {
    return Invalid(
        fmt::format("weight has {} loads, expected layers x logical_experts = {} x {} = {}",
                    weight_size, layers, logical_experts, expected));
  }
  if (num_replicas % num_gpus != 0) {
    return Invalid(fmt::format("num_replicas ({}) must be a multiple of num_gpus ({})",
                               num_replicas, num_gpus));
  }
  if (num_gpus % num_nodes != 0) {
    return Invalid(
        fmt::format("num_gpus ({}) must be a multiple of num_nodes ({})", num_gpus, num_nodes));
  }
  if (num_groups % num_nodes == 0 && logical_experts % num_groups != 0) {
    return Invalid(fmt::format("logical_experts ({}) must be a multiple of num_groups ({})",
                               logical_experts, num_groups));
  }
  if (num_replicas < logical_experts) {
    return Invalid(fmt::format("num_replicas ({}) must be at least logical_experts ({})",
                               num_replicas, logical_experts));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<EplbPlacement> RebalanceExperts(std::span<const double> weight, int layers,
                                               int logical_experts, int num_replicas,
                                               int num_groups, int num_nodes, int num_gpus,
                                               EplbTies ties, int min_copies) {
  if (absl::Status st = Validate(weight.size(), layers, logical_experts, num_replicas, num_groups,
                                 num_nodes, num_gpus);
      !st.ok()) {
    return st;
  }
  if (min_copies < 1 || static_cast<int64_t>(min_copies) * logical_experts > num_replicas) {
    return Invalid(fmt::format("min_copies ({}) must be at least 1 and leave num_replicas ({}) room for "
                               "that many copies of each of the {} logical experts",
                               min_copies, num_replicas, logical_experts));
  }
  // eplb.py works on weight.float(): so do we, to meet the same ties and roundings.
  // eplb.py works on weight.float(): so do we, to meet the same ties and roundings. A layer's
  // total must fit float32 too, so that no sum overflows (torch's and ours would differ there).
  constexpr double kFloatMax = std::numeric_limits<float>::max();
  std::vector<float> w(weight.size());
  const auto lsz = static_cast<size_t>(logical_experts);
  for (size_t l = 0; l < static_cast<size_t>(layers); ++l) {
    double total = 0;
    for (size_t e = 0; e < lsz; ++e) {
      const double x = weight[l * lsz + e];
      if (!(x >= 0 && x <= kFloatMax)) {
        return Invalid(fmt::format(
            "weight[{}][{}] (layer {}, logical expert {}) is {}: loads must be finite, "
            "non-negative and within float32 range",
            l, e, l, e, x));
      }
      // +0 for -0, whose bits would order above every positive load (see Bits).
      w[l * lsz + e] = x == 0 ? 0.0f : static_cast<float>(x);
      total += x;
    }
    if (total > kFloatMax) {
      return Invalid(fmt::format(
          "weight: the loads of layer {} add up to {}, beyond float32 range (scale them down)", l,
          total));
    }
  }

  EplbPlacement out;
  out.layers = layers;
  out.logical_experts = logical_experts;
  out.physical_experts = num_replicas;
  out.num_gpus = num_gpus;
  out.hierarchical = num_groups % num_nodes == 0;
  const Shape shape = out.hierarchical
                          ? Shape{logical_experts, num_replicas, num_groups, num_nodes, num_gpus, min_copies}
                          : Shape{logical_experts, num_replicas, 1, 1, num_gpus, min_copies};
  const auto psz = static_cast<size_t>(num_replicas);
  const auto nl = static_cast<size_t>(layers);
  out.phy2log.resize(nl * psz);
  out.logcnt.resize(nl * lsz);
  std::vector<int32_t> phy_rank(nl * psz);
  Workspace ws;
  for (size_t l = 0; l < nl; ++l) {
    RebalanceLayer(std::span<const float>(w).subspan(l * lsz, lsz), shape, ties,
                   std::span<int32_t>(out.phy2log).subspan(l * psz, psz),
                   std::span<int32_t>(phy_rank).subspan(l * psz, psz),
                   std::span<int32_t>(out.logcnt).subspan(l * lsz, lsz), ws);
  }
  out.max_replicas = *std::max_element(out.logcnt.begin(), out.logcnt.end());
  const auto maxr = static_cast<size_t>(out.max_replicas);
  out.log2phy.assign(nl * lsz * maxr, -1);
  for (size_t l = 0; l < nl; ++l) {
    for (size_t p = 0; p < psz; ++p) {
      const size_t i = l * psz + p;
      const size_t e = static_cast<size_t>(out.phy2log[i]);
      out.log2phy[(l * lsz + e) * maxr + static_cast<size_t>(phy_rank[i])] =
          static_cast<int32_t>(p);
    }
  }
  return out;
}

void LayerGpuLoads(std::span<const double> layer_weight, std::span<const int32_t> row, int per_gpu,
                   std::span<const uint8_t> dead, std::span<double> load) {
  const size_t per = static_cast<size_t>(std::max(per_gpu, 1));
  const auto live = [&](size_t g) { return dead.empty() || dead[g] == 0; };
  std::vector<int> copies(layer_weight.size(), 0);
  for (size_t q = 0; q < row.size(); ++q) {
    if (row[q] >= 0 && live(q / per)) ++copies[static_cast<size_t>(row[q])];
  }
  for (size_t g = 0; g < load.size(); ++g) {
    load[g] = 0;
    if (!live(g)) continue;
    for (size_t s = 0; s < per && g * per + s < row.size(); ++s) {
      const int32_t e = row[g * per + s];
      if (e >= 0) load[g] += layer_weight[static_cast<size_t>(e)] / copies[static_cast<size_t>(e)];
    }
  }
}

double MaxOverMean(std::span<const double> load, std::span<const uint8_t> dead) {
  double total = 0, max = 0;
  size_t n = 0;
  for (size_t g = 0; g < load.size(); ++g) {
    if (!dead.empty() && dead[g] != 0) continue;
    ++n;
    total += load[g];
    max = std::max(max, load[g]);
  }
  if (total <= 0 || n == 0) return 1.0;
  return max / (total / static_cast<double>(n));
}

absl::StatusOr<EplbImbalance> MeasureImbalance(std::span<const double> weight,
                                               const EplbPlacement& placement) {
  const auto nl = static_cast<size_t>(placement.layers);
  const auto lsz = static_cast<size_t>(placement.logical_experts);
  const auto psz = static_cast<size_t>(placement.physical_experts);
  const auto gpus = static_cast<size_t>(placement.num_gpus);
  if (weight.size() != nl * lsz) {
    return Invalid(fmt::format("weight has {} loads, the placement is for {} x {} = {}",
                               weight.size(), nl, lsz, nl * lsz));
  }
  if (gpus == 0 || psz % gpus != 0 || placement.phy2log.size() != nl * psz ||
      placement.logcnt.size() != nl * lsz) {
    return Invalid("placement is malformed (sizes of phy2log, logcnt or num_gpus)");
  }
  const size_t per_gpu = psz / gpus;
  EplbImbalance r;
  r.gpu_load_before.assign(nl * gpus, 0.0);
  r.gpu_load_after.assign(nl * gpus, 0.0);
  r.per_layer_before.resize(nl);
  r.per_layer_after.resize(nl);
  for (size_t l = 0; l < nl; ++l) {
    const std::span<const int32_t> row(placement.phy2log.data() + l * psz, psz);
    for (size_t p = 0; p < psz; ++p) {
      const auto e = static_cast<size_t>(row[p]);
      if (e >= lsz || placement.logcnt[l * lsz + e] <= 0) {
        return Invalid(fmt::format("placement is malformed at layer {}, physical expert {}", l, p));
      }
    }
    const std::span<const double> layer_weight = weight.subspan(l * lsz, lsz);
    std::span<double> before(r.gpu_load_before.data() + l * gpus, gpus);
    std::span<double> after(r.gpu_load_after.data() + l * gpus, gpus);
    for (size_t e = 0; e < lsz; ++e) before[e * gpus / lsz] += layer_weight[e];
    LayerGpuLoads(layer_weight, row, static_cast<int>(per_gpu), {}, after);
    r.per_layer_before[l] = MaxOverMean(before);
    r.per_layer_after[l] = MaxOverMean(after);
  }
  if (nl > 0) {
    const double n = static_cast<double>(nl);
    r.mean_before = std::accumulate(r.per_layer_before.begin(), r.per_layer_before.end(), 0.0) / n;
    r.mean_after = std::accumulate(r.per_layer_after.begin(), r.per_layer_after.end(), 0.0) / n;
    r.max_before = *std::max_element(r.per_layer_before.begin(), r.per_layer_before.end());
    r.max_after = *std::max_element(r.per_layer_after.begin(), r.per_layer_after.end());
  }
  return r;
}

}  // namespace myriad::policy
