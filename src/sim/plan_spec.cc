#include "sim/plan_spec.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "perf/hardware.h"
#include "policy/router.h"
#include "sim/topology.h"
#include "sim/yaml_reader.h"

namespace myriad::sim {
namespace {

// A list of integers within [lo, hi], 1 to kMaxPlanListEntries of them; `dflt` when absent.
absl::Status ReadIntList(const Reader& rd, const YAML::Node& map, const char* key, const std::string& path, int lo,
                         int hi, std::vector<int> dflt, std::vector<int>* out) {
  const YAML::Node n = map[key];
  const std::string where = Reader::Join(path, key);
  if (!n) {
    *out = std::move(dflt);
    return absl::OkStatus();
  }
  if (!n.IsSequence() || n.size() == 0 || n.size() > static_cast<size_t>(kMaxPlanListEntries)) {
    return rd.Error(n, where, fmt::format("expected a list of 1 to {} values", kMaxPlanListEntries));
  }
  out->clear();
  for (size_t i = 0; i < n.size(); ++i) {
    const std::string at = fmt::format("{}[{}]", where, i);
    int v = 0;
    MYRIAD_RETURN_IF_ERROR(rd.Read(n[i], at, &v));
    if (v < lo || v > hi) return rd.Error(n[i], at, fmt::format("must be between {} and {} (got {})", lo, hi, v));
    out->push_back(v);
  }
  return absl::OkStatus();
}

absl::Status ParseChoices(const Reader& rd, const YAML::Node& n, const std::string& p, const HardwareConfig& hw,
                          const std::vector<PlanGpu>& cards, Role role, PlanPoolChoices* c) {
  MYRIAD_RETURN_IF_ERROR(rd.Map(n, p, {"gpus", "layouts", "max_batch_tokens", "max_seqs", "units", "moe"}));
  c->enabled = true;
  if (const YAML::Node gs = n["gpus"]) {
    if (!gs.IsSequence() || gs.size() == 0 || gs.size() > cards.size()) {
      return rd.Error(gs, p + ".gpus", fmt::format("expected a list of 1 to {} of search.gpus' types", cards.size()));
    }
    for (size_t i = 0; i < gs.size(); ++i) {
      const std::string at = fmt::format("{}.gpus[{}]", p, i);
      std::string type;
      MYRIAD_RETURN_IF_ERROR(rd.Read(gs[i], at, &type));
      const auto it = std::find_if(cards.begin(), cards.end(), [&](const PlanGpu& g) { return g.type == type; });
      if (it == cards.end()) return rd.Error(gs[i], at, fmt::format("'{}' is not one of search.gpus' types", type));
      const auto idx = static_cast<size_t>(it - cards.begin());
      if (std::find(c->gpus.begin(), c->gpus.end(), idx) != c->gpus.end()) {
        return rd.Error(gs[i], at, fmt::format("'{}' is listed twice", type));
      }
      c->gpus.push_back(idx);
    }
  }
  const YAML::Node ls = n["layouts"];
  if (!ls || !ls.IsSequence() || ls.size() == 0 || ls.size() > static_cast<size_t>(kMaxPlanListEntries)) {
    return rd.Error(ls ? ls : n, p + ".layouts",
                    fmt::format("expected a list of 1 to {} layouts (e.g. {{tp: 1, dp: 32, ep: 32}})", kMaxPlanListEntries));
  }
  for (size_t i = 0; i < ls.size(); ++i) {
    perf::UnitLayout lay;
    MYRIAD_RETURN_IF_ERROR(ParseUnitLayout(rd, ls[i], fmt::format("{}.layouts[{}]", p, i), hw, &lay));
    c->layouts.push_back(lay);
  }
  // The scenario's own defaults: a decode pool's chunk budget is small, it only decodes.
  const int mbt = role == Role::kDecode ? 2048 : 8192;
  MYRIAD_RETURN_IF_ERROR(ReadIntList(rd, n, "max_batch_tokens", p, 1, kMaxTokens, {mbt}, &c->max_batch_tokens));
  MYRIAD_RETURN_IF_ERROR(ReadIntList(rd, n, "max_seqs", p, 1, kMaxPlanSeqs, {128}, &c->max_seqs));
  MYRIAD_RETURN_IF_ERROR(ReadIntList(rd, n, "units", p, 1, kMaxPlanSliceUnits, {1}, &c->units));
  if (const YAML::Node ms = n["moe"]) {
    if (!ms.IsSequence() || ms.size() == 0 || ms.size() > static_cast<size_t>(kMaxPlanListEntries)) {
      return rd.Error(ms, p + ".moe",
                      fmt::format("expected a list of 1 to {} entries, each off or a pool's moe mapping", kMaxPlanListEntries));
    }
    c->moes.clear();
    c->moe_yaml.clear();
    for (size_t i = 0; i < ms.size(); ++i) {
      const std::string at = fmt::format("{}.moe[{}]", p, i);
      MoeConfig moe;
      if (ms[i].IsScalar() && ms[i].Scalar() == "off") {
        c->moe_yaml.emplace_back();
      } else if (ms[i].IsMap()) {
        MYRIAD_RETURN_IF_ERROR(ParseMoeConfig(rd, ms[i], at, &moe));
        c->moe_yaml.push_back(ms[i]);
      } else {
        return rd.Error(ms[i], at, "expected off or a mapping such as {placement: eplb, two_batch_overlap: true}");
      }
      c->moes.push_back(std::move(moe));
    }
  }
  return absl::OkStatus();
}

// How many combinations Combos() gives, counted without building them.
double ComboCount(const PlanPoolChoices& c) {
  if (!c.enabled) return 0;
  return static_cast<double>(std::max<size_t>(c.gpus.size(), 1)) * static_cast<double>(c.layouts.size()) *
         static_cast<double>(c.max_batch_tokens.size()) * static_cast<double>(c.max_seqs.size()) *
         static_cast<double>(c.units.size()) * static_cast<double>(c.moes.size());
}

// Every combination of one role's choices, in the spec's order.
std::vector<PlanShape::Pool> Combos(const PlanPoolChoices& c, Role role) {
  std::vector<PlanShape::Pool> out;
  if (!c.enabled) return out;
  std::vector<int> cards;
  for (size_t g : c.gpus) cards.push_back(static_cast<int>(g));
  if (cards.empty()) cards.push_back(-1);  // the shape's card
  for (int g : cards) {
    for (size_t l = 0; l < c.layouts.size(); ++l) {
      for (int mbt : c.max_batch_tokens) {
        for (int seqs : c.max_seqs) {
          for (int units : c.units) {
            for (size_t m = 0; m < c.moes.size(); ++m) out.push_back({role, g, l, mbt, seqs, units, m});
          }
        }
      }
    }
  }
  return out;
}

absl::Status ParseSearch(const Reader& rd, const YAML::Node& n, PlanSpec* spec) {
  const std::string p = "search";
  MYRIAD_RETURN_IF_ERROR(rd.Map(n, p, {"max_gpus", "window", "gpus", "routers", "prefill", "decode", "colocated"}));
  if (!n["max_gpus"]) return rd.Error(n, "search.max_gpus", "missing: the most GPUs a deployment may hold");
  MYRIAD_RETURN_IF_ERROR(rd.Get(n, "max_gpus", p, &spec->max_gpus));
  MYRIAD_RETURN_IF_ERROR(rd.Check(n, "max_gpus", p, spec->max_gpus >= 1 && spec->max_gpus <= kMaxGpus,
                                  fmt::format("must be between 1 and {}", kMaxGpus), spec->max_gpus));
  const Scenario& b = spec->base;
  spec->window = b.duration;
  MYRIAD_RETURN_IF_ERROR(rd.Duration(n, "window", p, &spec->window));
  MYRIAD_RETURN_IF_ERROR(rd.Check(n, "window", p, spec->window > 0 && spec->window <= b.duration,
                                  fmt::format("must be positive and at most duration ({})", FormatDuration(b.duration)),
                                  FormatDuration(spec->window)));
  const YAML::Node gs = n["gpus"];
  if (!gs || !gs.IsSequence() || gs.size() == 0 || gs.size() > static_cast<size_t>(kMaxPlanListEntries)) {
    return rd.Error(gs ? gs : n, "search.gpus",
                    fmt::format("expected a list of 1 to {} GPU types, e.g. [{{type: H200, price: 2.0}}]", kMaxPlanListEntries));
  }
  for (size_t i = 0; i < gs.size(); ++i) {
    const std::string gp = fmt::format("search.gpus[{}]", i);
    MYRIAD_RETURN_IF_ERROR(rd.Map(gs[i], gp, {"type", "price"}));
    PlanGpu g;
    if (!gs[i]["type"]) return rd.Error(gs[i], gp + ".type", "missing (H100, H200, H800, B200)");
    MYRIAD_RETURN_IF_ERROR(rd.Get(gs[i], "type", gp, &g.type));
    if (auto f = perf::FindGpu(g.type); !f.ok()) return rd.Error(gs[i]["type"], gp + ".type", std::string(f.status().message()));
    MYRIAD_RETURN_IF_ERROR(rd.Get(gs[i], "price", gp, &g.price));
    MYRIAD_RETURN_IF_ERROR(rd.Check(gs[i], "price", gp, g.price >= 0 && g.price <= 1e6,
                                    "must be between 0 and 1e6 dollars per GPU-hour", g.price));
    spec->gpus.push_back(std::move(g));
  }
  if (const YAML::Node rs = n["routers"]) {
    if (!rs.IsSequence() || rs.size() == 0 || rs.size() > static_cast<size_t>(kMaxPlanListEntries)) {
      return rd.Error(rs, "search.routers", fmt::format("expected a list of 1 to {} routing policies", kMaxPlanListEntries));
    }
    for (size_t i = 0; i < rs.size(); ++i) {
      std::string name;
      MYRIAD_RETURN_IF_ERROR(rd.Read(rs[i], fmt::format("search.routers[{}]", i), &name));
      if (auto pn = policy::ParsePolicyName(name); !pn.ok()) {
        return rd.Error(rs[i], fmt::format("search.routers[{}]", i), std::string(pn.status().message()));
      }
      spec->routers.push_back(name);
    }
  } else {
    spec->routers.push_back(b.router.policy);
  }
  // Layouts are checked against the largest cluster the budget allows.
  HardwareConfig hw = b.hardware;
  hw.nodes = (spec->max_gpus + hw.gpus_per_node - 1) / hw.gpus_per_node;
  if (const YAML::Node c = n["prefill"]) MYRIAD_RETURN_IF_ERROR(ParseChoices(rd, c, "search.prefill", hw, spec->gpus, Role::kPrefill, &spec->prefill));
  if (const YAML::Node c = n["decode"]) MYRIAD_RETURN_IF_ERROR(ParseChoices(rd, c, "search.decode", hw, spec->gpus, Role::kDecode, &spec->decode));
  if (const YAML::Node c = n["colocated"]) {
    MYRIAD_RETURN_IF_ERROR(ParseChoices(rd, c, "search.colocated", hw, spec->gpus, Role::kColocated, &spec->colocated));
  }
  if (spec->prefill.enabled != spec->decode.enabled) {
    return rd.Error(n, spec->prefill.enabled ? "search.decode" : "search.prefill",
                    "missing: a disaggregated deployment needs both prefill and decode choices");
  }
  if (!spec->prefill.enabled && !spec->colocated.enabled) {
    return rd.Error(n, "search", "needs prefill and decode choices, colocated choices, or both");
  }
  // Counted in doubles before anything is built: a few long lists multiply quickly. A
  // combination whose pools all have their own cards takes no shape-level card: counted once.
  const double cards = static_cast<double>(spec->gpus.size());
  const double pairs = ComboCount(spec->prefill) * ComboCount(spec->decode);
  const double own_pairs = !spec->prefill.gpus.empty() && !spec->decode.gpus.empty() ? pairs : 0;
  const double colocated = ComboCount(spec->colocated), own_colocated = spec->colocated.gpus.empty() ? 0 : colocated;
  const double shapes = static_cast<double>(spec->routers.size()) *
                        ((pairs - own_pairs) * cards + own_pairs + (colocated - own_colocated) * cards + own_colocated);
  if (shapes > kMaxPlanShapes) {
    return rd.Error(n, "search",
                    fmt::format("the lists combine into {:.0f} deployment shapes, more than the maximum of {}; "
                                "shorten them",
                                shapes, kMaxPlanShapes));
  }
  const auto pc = Combos(spec->prefill, Role::kPrefill), dc = Combos(spec->decode, Role::kDecode),
             cc = Combos(spec->colocated, Role::kColocated);
  for (size_t g = 0; g < spec->gpus.size(); ++g) {
    for (size_t r = 0; r < spec->routers.size(); ++r) {
      for (const auto& pp : pc) {
        for (const auto& dp : dc) {
          if (g == 0 || pp.gpu < 0 || dp.gpu < 0) spec->shapes.push_back({g, r, {pp, dp}});
        }
      }
      for (const auto& cp : cc) {
        if (g == 0 || cp.gpu < 0) spec->shapes.push_back({g, r, {cp}});
      }
    }
  }
  return absl::OkStatus();
}

// The scenario keys a spec shares with a scenario, under the scenario parser's own rules; the
// hardware's card and size, and the pools, are the search's.
absl::Status ParseBase(const Reader& rd, const YAML::Node& root, const std::string& source_name,
                       const std::string& source_dir, PlanSpec* spec) {
  YAML::Node tree(YAML::NodeType::Map);
  for (const char* k : {"name", "seed", "duration", "drain", "model", "workload", "tenants", "kv_block_tokens"}) {
    if (root[k]) tree[k] = root[k];
  }
  const YAML::Node h = root["hardware"];
  YAML::Node hw(YAML::NodeType::Map);
  if (h) {
    MYRIAD_RETURN_IF_ERROR(rd.Map(h, "hardware", {"gpus_per_node", "nodes_per_rack", "nic_gbps", "spine_oversubscription"}));
    for (const auto& kv : h) hw[kv.first.Scalar()] = kv.second;
  }
  hw["gpu"] = "H200";
  hw["nodes"] = 1;
  tree["hardware"] = hw;
  if (const YAML::Node slo = root["slo"]) {
    MYRIAD_RETURN_IF_ERROR(rd.Map(slo, "slo", {"ttft", "tpot", "attainment"}));
    YAML::Node s(YAML::NodeType::Map);
    for (const char* k : {"ttft", "tpot"}) {
      if (slo[k]) s[k] = slo[k];
    }
    tree["slo"] = s;
    MYRIAD_RETURN_IF_ERROR(rd.Get(slo, "attainment", "slo", &spec->attainment));
    MYRIAD_RETURN_IF_ERROR(rd.Check(slo, "attainment", "slo", spec->attainment > 0 && spec->attainment <= 1,
                                    "must be above 0 and at most 1 (a fraction of requests)", spec->attainment));
  }
  // A placeholder: the scenario parser wants a pool; every candidate replaces it.
  YAML::Node pool(YAML::NodeType::Map);
  YAML::Node layout(YAML::NodeType::Map);
  layout["tp"] = 1;
  pool["count"] = 0;
  pool["layout"] = layout;
  YAML::Node pools(YAML::NodeType::Sequence);
  pools.push_back(pool);
  tree["pools"] = pools;
  auto base = ParseScenarioTree(tree, source_name, source_dir);
  if (!base.ok()) return base.status();
  spec->base = std::move(*base);
  spec->base.pools.clear();
  // Assigned only when present: a missing key of a const node is invalid, and assigning it throws.
  if (root["workload"]) spec->workload = root["workload"];
  if (root["tenants"]) spec->tenants = root["tenants"];
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<PlanSpec> ParsePlanSpec(std::string_view yaml, const std::string& source_name,
                                       const std::string& source_dir) {
  Reader rd(source_name);
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml));
  } catch (const YAML::ParserException& e) {
    return absl::InvalidArgumentError(fmt::format("{}:{}: YAML syntax: {}", source_name, e.mark.line + 1, e.msg));
  }
  if (!root || !root.IsMap()) return absl::InvalidArgumentError(fmt::format("{}: expected a YAML mapping at the top", source_name));
  PlanSpec spec;
  spec.source = source_name;
  try {
    MYRIAD_RETURN_IF_ERROR(rd.UniqueKeys(root));
    MYRIAD_RETURN_IF_ERROR(rd.Map(root, "", {"name", "seed", "duration", "drain", "model", "hardware", "workload",
                                             "tenants", "slo", "kv_block_tokens", "search"}));
    if (!root["search"]) return rd.Error(root, "search", "missing: the GPU types and the choices to combine");
    MYRIAD_RETURN_IF_ERROR(ParseBase(rd, root, source_name, source_dir, &spec));
    MYRIAD_RETURN_IF_ERROR(ParseSearch(rd, root["search"], &spec));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(fmt::format("{}:{}: {}", source_name, e.mark.line + 1, e.msg));
  }
  return spec;
}

absl::StatusOr<PlanSpec> LoadPlanSpec(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(fmt::format("{}: cannot open plan spec", path));
  std::stringstream ss;
  ss << in.rdbuf();
  return ParsePlanSpec(ss.str(), path, std::filesystem::path(path).parent_path().string());
}

namespace {

// Nodes the units take when placed as the simulator's topology places them.
int64_t NodesFor(const PlanSpec& spec, const PlanShape& shape, int64_t copies) {
  const HardwareConfig& hw = spec.base.hardware;
  int64_t gpus = 0;
  // Units of one pool pack the same way whatever precedes them once they own whole nodes; the
  // sub-node ones are placed one by one (bounded by kMaxGpus units in all).
  for (const auto& p : shape.pools) {
    const perf::UnitLayout& lay = spec.Choices(p.role).layouts[p.layout];
    const int64_t units = copies * p.units;
    const bool whole_nodes = lay.nodes > 1 || lay.gpus() == hw.gpus_per_node;
    if (whole_nodes) {
      gpus = (gpus + hw.gpus_per_node - 1) / hw.gpus_per_node * hw.gpus_per_node + units * lay.nodes * hw.gpus_per_node;
      continue;
    }
    for (int64_t u = 0; u < units && gpus <= int64_t{kMaxGpus} * 2; ++u) {
      if (gpus % hw.gpus_per_node + lay.gpus() > hw.gpus_per_node) gpus = (gpus + hw.gpus_per_node - 1) / hw.gpus_per_node * hw.gpus_per_node;
      gpus += lay.gpus();
    }
  }
  return (gpus + hw.gpus_per_node - 1) / hw.gpus_per_node;
}

}  // namespace

const PlanGpu& PoolCard(const PlanSpec& spec, const PlanShape& shape, const PlanShape::Pool& pool) {
  return spec.gpus[pool.gpu >= 0 ? static_cast<size_t>(pool.gpu) : shape.gpu];
}

double SliceDollarsPerHour(const PlanSpec& spec, const PlanShape& shape) {
  double dollars = 0;
  for (const auto& p : shape.pools) {
    dollars += static_cast<double>(p.units) * spec.Choices(p.role).layouts[p.layout].gpus() * PoolCard(spec, shape, p).price;
  }
  return dollars;
}

int SliceGpus(const PlanSpec& spec, const PlanShape& shape) {
  int64_t gpus = 0;
  for (const auto& p : shape.pools) gpus += int64_t{p.units} * spec.Choices(p.role).layouts[p.layout].gpus();
  return static_cast<int>(std::min<int64_t>(gpus, std::numeric_limits<int>::max()));
}

absl::StatusOr<Scenario> BuildPlanScenario(const PlanSpec& spec, const PlanShape& shape, int copies, bool whole) {
  if (copies < 1) return absl::InvalidArgumentError("a deployment needs at least one copy of its slice");
  Scenario s = spec.base;
  // The first pool's card names the cluster's (the report's `scenario.gpu`); a pool on another
  // card names its own.
  const PlanGpu& lead = PoolCard(spec, shape, shape.pools.front());
  s.hardware.gpu = lead.type;
  s.gpu_hour_price = lead.price;
  s.router.policy = spec.routers[shape.router];
  const int64_t nodes = NodesFor(spec, shape, whole ? copies : 1);
  if (nodes * s.hardware.gpus_per_node > kMaxGpus) {
    return absl::InvalidArgumentError(fmt::format("{} copies need {} nodes, past the simulator's {} GPUs", copies, nodes, kMaxGpus));
  }
  s.hardware.nodes = static_cast<int>(nodes);
  s.pools.clear();
  for (const auto& p : shape.pools) {
    PoolConfig pc;
    pc.name = std::string(RoleName(p.role));
    pc.role = p.role;
    pc.count = p.units * (whole ? copies : 1);
    pc.layout = spec.Choices(p.role).layouts[p.layout];
    pc.max_batch_tokens = p.max_batch_tokens;
    pc.max_seqs = p.max_seqs;
    pc.moe = spec.Choices(p.role).moes[p.moe];
    const PlanGpu& card = PoolCard(spec, shape, p);
    if (card.type != lead.type) pc.gpu = card.type;
    // Priced per pool, so that the report counts the GPUs in units, not the nodes' spare ones:
    // a slice of small units would otherwise pay for whole nodes its copies would share.
    pc.gpu_hour_price = card.price;
    s.pools.push_back(std::move(pc));
  }
  if (!whole) {
    s.duration = spec.window;
    s.workload.synthetic.duration = s.duration;
    s.workload.replay.duration = s.duration;
    if (copies > 1) MYRIAD_RETURN_IF_ERROR(ScaleLoad(s, 1.0 / copies));
  }
  return s;
}

std::string DescribeShape(const PlanSpec& spec, const PlanShape& shape) {
  const std::string& lead = PoolCard(spec, shape, shape.pools.front()).type;
  std::string out = fmt::format("{} {}", lead, spec.routers[shape.router]);
  for (const auto& p : shape.pools) {
    const perf::UnitLayout& l = spec.Choices(p.role).layouts[p.layout];
    const char* tag = p.role == Role::kPrefill ? "P" : p.role == Role::kDecode ? "D" : "C";
    const std::string& card = PoolCard(spec, shape, p).type;
    const MoeConfig& moe = spec.Choices(p.role).moes[p.moe];
    const std::string moe_tag =
        moe.enabled ? fmt::format(", moe {}{}", moe.placement, moe.two_batch_overlap ? " tbo" : "") : "";
    out += fmt::format(" {} {}x{}(tp{} dp{} ep{}, mbt {}, seqs {}{})", tag, p.units, card == lead ? "" : card, l.tp,
                       l.dp, l.ep, p.max_batch_tokens, p.max_seqs, moe_tag);
  }
  return out;
}

std::string FormatPlanScenarioYaml(const PlanSpec& spec, const PlanShape& shape, int copies) {
  auto s = BuildPlanScenario(spec, shape, copies, true);
  if (!s.ok()) return "";
  YAML::Node root(YAML::NodeType::Map);
  root["name"] = s->name;
  root["seed"] = s->seed;
  root["duration"] = fmt::format("{}s", NanosToSeconds(s->duration));
  root["drain"] = fmt::format("{}s", NanosToSeconds(s->drain));
  const HardwareConfig& h = s->hardware;
  YAML::Node hw;
  hw["gpu"] = h.gpu;
  hw["nodes"] = h.nodes;
  hw["gpus_per_node"] = h.gpus_per_node;
  hw["nodes_per_rack"] = h.nodes_per_rack;
  // Numbers as their shortest exact text: the emitter's own would print 0.1 as 0.1000000000000001.
  hw["nic_gbps"] = fmt::format("{}", h.nic_gbps);
  hw["spine_oversubscription"] = fmt::format("{}", h.spine_oversubscription);
  root["hardware"] = hw;
  root["model"] = s->model;
  YAML::Node pools(YAML::NodeType::Sequence);
  for (size_t i = 0; i < s->pools.size(); ++i) {
    const PoolConfig& p = s->pools[i];
    YAML::Node n;
    n["name"] = p.name;
    n["role"] = std::string(RoleName(p.role));
    n["count"] = p.count;
    if (!p.gpu.empty()) n["gpu"] = p.gpu;
    YAML::Node l;
    l["tp"] = p.layout.tp;
    l["dp"] = p.layout.dp;
    l["ep"] = p.layout.ep;
    l["nodes"] = p.layout.nodes;
    l["redundant_experts"] = p.layout.redundant_experts;
    l.SetStyle(YAML::EmitterStyle::Flow);
    n["layout"] = l;
    n["max_batch_tokens"] = p.max_batch_tokens;
    n["max_seqs"] = p.max_seqs;
    n["gpu_hour_price"] = fmt::format("{}", p.gpu_hour_price);
    const PlanShape::Pool& sp = shape.pools[i];
    if (const YAML::Node& moe = spec.Choices(sp.role).moe_yaml[sp.moe]; !moe.IsNull()) n["moe"] = YAML::Clone(moe);
    pools.push_back(n);
  }
  root["pools"] = pools;
  // Default-constructed (absent in the spec) nodes are null, not undefined.
  YAML::Node workload = spec.workload.IsNull() ? YAML::Node() : YAML::Clone(spec.workload);
  // A trace's path was relative to the spec; the plan may be written anywhere.
  if (workload && workload.IsMap() && workload["path"]) {
    workload["path"] = std::filesystem::absolute(s->workload.trace_path).lexically_normal().string();
  }
  if (!workload.IsNull()) root["workload"] = workload;
  root["router"] = s->router.policy;
  if (!spec.tenants.IsNull()) root["tenants"] = YAML::Clone(spec.tenants);
  YAML::Node slo;
  slo["ttft"] = fmt::format("{}s", NanosToSeconds(s->slo.ttft));
  slo["tpot"] = fmt::format("{}s", NanosToSeconds(s->slo.tpot));
  slo.SetStyle(YAML::EmitterStyle::Flow);
  root["slo"] = slo;
  root["gpu_hour_price"] = fmt::format("{}", s->gpu_hour_price);
  root["kv_block_tokens"] = s->kv_block_tokens;
  YAML::Emitter e;
  e << root;
  return fmt::format("# Written by `myriad plan {}`: {} copies of its slice (docs/plan.md).\n# {}\n{}\n", spec.source,
                     copies, DescribeShape(spec, shape), e.c_str());
}

absl::Status CheckPlanBaseline(const PlanSpec& spec, const Scenario& b) {
  const Scenario& s = spec.base;
  auto differ = [](const char* what, const std::string& spec_value, const std::string& baseline_value) {
    return absl::InvalidArgumentError(
        fmt::format("its {} ({}) is not the spec's ({}): the two costs would not compare", what, baseline_value, spec_value));
  };
  if (b.model != s.model) return differ("model", s.model, b.model);
  if (b.slo.ttft != s.slo.ttft || b.slo.tpot != s.slo.tpot) {
    return differ("SLO", fmt::format("ttft {}, tpot {}", FormatDuration(s.slo.ttft), FormatDuration(s.slo.tpot)),
                  fmt::format("ttft {}, tpot {}", FormatDuration(b.slo.ttft), FormatDuration(b.slo.tpot)));
  }
  if (b.duration != s.duration) return differ("duration", FormatDuration(s.duration), FormatDuration(b.duration));
  if (b.workload.type != s.workload.type) return differ("workload type", s.workload.type, b.workload.type);
  if (s.workload.type == "synthetic" && b.workload.synthetic.rate != s.workload.synthetic.rate) {
    return differ("workload rate", fmt::format("{}", s.workload.synthetic.rate), fmt::format("{}", b.workload.synthetic.rate));
  }
  if (s.workload.type != "synthetic" && b.workload.trace_path != s.workload.trace_path) {
    return differ("trace", s.workload.trace_path, b.workload.trace_path);
  }
  return absl::OkStatus();
}

PlanFigures ReadPlanFigures(const nlohmann::ordered_json& r) {
  // A key the report lacks reads as `missing`, never as an exception out of the search.
  auto num = [](const nlohmann::ordered_json& j, const char* path, double missing) {
    const nlohmann::ordered_json::json_pointer ptr(path);
    return j.contains(ptr) && j.at(ptr).is_number() ? j.at(ptr).get<double>() : missing;
  };
  PlanFigures f;
  f.attainment = num(r, "/requests/slo_attainment", 0);
  // Nothing within the SLO: a cost per token within it does not exist.
  f.cost_per_million_tokens = f.attainment > 0 ? num(r, "/cost/per_million_tokens_within_slo", INFINITY) : INFINITY;
  f.ttft_p99_s = num(r, "/latency_s/ttft/p99", 0);
  f.tpot_p99_s = num(r, "/latency_s/tpot/p99", 0);
  f.gpus = num(r, "/scenario/gpus", 0);
  f.span_s = num(r, "/scenario/end_s", 0);
  f.arrived_output_tokens = num(r, "/tokens/arrived_output", 0);
  f.prefill_computed_tokens = num(r, "/tokens/prefill_computed", 0);
  f.prefix_hit_rate = num(r, "/tokens/prefix_hit_rate", 0);
  f.kv_transfer_gigabytes = num(r, "/kv_transfer/gigabytes", 0);
  if (r.contains("pools") && r["pools"].is_array()) {
    for (const auto& p : r["pools"]) f.kv_capacity_tokens_per_unit.push_back(num(p, "/kv_capacity_tokens_per_unit", 0));
  }
  return f;
}

}  // namespace myriad::sim
