#include "policy/router.h"

#include "policy/engine_cache_model.h"
#include "policy/load_peek.h"
#include "policy/load_ranking.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "core/strings.h"

namespace myriad::policy {

absl::StatusOr<PolicyName> ParsePolicyName(std::string_view name, RouterOptions base) {
  PolicyName out{base, false};
  out.options.spread_hot_prefixes = false;
  std::string_view rest = name;
  const size_t plus = rest.find('+');
  std::string_view head = rest.substr(0, plus);
  if (head == "random") out.options.policy = RoutingPolicy::kRandom;
  else if (head == "round-robin") out.options.policy = RoutingPolicy::kRoundRobin;
  else if (head == "least-loaded") out.options.policy = RoutingPolicy::kLeastLoaded;
  else if (head == "prefix-only") out.options.policy = RoutingPolicy::kPrefixOnly;
  else if (head == "kv-aware") out.options.policy = RoutingPolicy::kKvAware;
  else {
    return absl::InvalidArgumentError(fmt::format(
        "unknown routing policy '{}' (known: random, round-robin, least-loaded, prefix-only, "
        "kv-aware; add +spread for hot-prefix spreading, +fair for tenant fairness)", name));
  }
  while (plus != std::string_view::npos && !rest.empty()) {
    rest = rest.substr(rest.find('+') + 1);
    const size_t next = rest.find('+');
    std::string_view flag = rest.substr(0, next);
    if (flag == "spread") {
      if (out.options.policy != RoutingPolicy::kPrefixOnly && out.options.policy != RoutingPolicy::kKvAware) {
        return absl::InvalidArgumentError(fmt::format("'{}': +spread needs prefix-only or kv-aware", name));
      }
      out.options.spread_hot_prefixes = true;
    } else if (flag == "fair") {
      out.fair = true;
    } else {
      return absl::InvalidArgumentError(fmt::format("'{}': unknown modifier '+{}' (known: +spread, +fair)", name, flag));
    }
    if (next == std::string_view::npos) break;
  }
  return out;
}

std::string FormatPolicyName(const RouterOptions& o, bool fair) {
  std::string s;
  switch (o.policy) {
    case RoutingPolicy::kRandom: s = "random"; break;
    case RoutingPolicy::kRoundRobin: s = "round-robin"; break;
    case RoutingPolicy::kLeastLoaded: s = "least-loaded"; break;
    case RoutingPolicy::kPrefixOnly: s = "prefix-only"; break;
    case RoutingPolicy::kKvAware: s = "kv-aware"; break;
  }
  if (o.spread_hot_prefixes) s += "+spread";
  if (fair) s += "+fair";
  return s;
}

Router::Router(RouterOptions options, PrefixIndex* index) : options_(options), index_(index) {
  const char* name = options.policy == RoutingPolicy::kRandom       ? "random"
                     : options.policy == RoutingPolicy::kRoundRobin ? "round-robin"
                                                                     : "least-loaded";
  balancer_ = std::move(*MakeLoadBalancer(name));
  decode_balancer_ = std::move(*MakeLoadBalancer(
      options.policy == RoutingPolicy::kRandom || options.policy == RoutingPolicy::kRoundRobin ? name : "least-loaded"));
}

int Router::LikelyEntry() const {
  if (options_.policy != RoutingPolicy::kLeastLoaded || entry_ranking_ == nullptr) return -1;
  return PeekLeastLoaded(*balancer_, *entry_ranking_);
}

int Router::PickDecode(std::span<const Candidate> decode, Rng& rng) {
  if (decode.empty()) return -1;
  return decode_balancer_->Pick(LoadView(decode, &Candidate::load).with_ranking(decode_ranking_), Phase::kDecode, rng);
}

void Router::MatchAll(const RouteRequest& req, std::span<const Candidate> entry) {
  matched_.assign(entry.size(), 0);
  reach_.assign(entry.size(), 0);
  if (index_ == nullptr || req.blocks.empty()) return;
  index_->Match(req.blocks, req.now, &matches_);
  if (matches_.empty()) {
    if (shared_store_ != nullptr && options_.policy == RoutingPolicy::kKvAware) ReachIntoSharedStore(req, entry);
    return;
  }
  // Holder ids are small and candidates few: a direct scan of the (holder-sorted) matches.
  auto blocks_of = [&](HolderId holder) -> uint32_t {
    auto it = std::lower_bound(matches_.begin(), matches_.end(), holder,
                               [](const PrefixMatch& m, HolderId h) { return m.holder < h; });
    if (it == matches_.end() || it->holder != holder) return 0;
    // A holder whose publisher lost events may have dropped part of it: trust half.
    return it->suspect ? it->matched_blocks / 2 : it->matched_blocks;
  };
  for (size_t i = 0; i < entry.size(); ++i) {
    matched_[i] = blocks_of(entry[i].holder);
    reach_[i] = entry[i].store_holder == kNoStoreHolder ? matched_[i]
                                                        : std::max(matched_[i], blocks_of(entry[i].store_holder));
  }
  if (shared_store_ != nullptr && options_.policy == RoutingPolicy::kKvAware) ReachIntoSharedStore(req, entry);
}

void Router::ReachIntoSharedStore(const RouteRequest& req, std::span<const Candidate> entry) {
  // Candidates share few distinct prefix lengths (most hold none of a prompt): one lookup each.
  store_runs_.clear();
  for (size_t i = 0; i < entry.size(); ++i) {
    if (!entry[i].load.available || entry[i].cost == nullptr) continue;
    const uint32_t own = std::min<uint32_t>(matched_[i], static_cast<uint32_t>(req.blocks.size()));
    auto it = std::find_if(store_runs_.begin(), store_runs_.end(), [&](const auto& r) { return r.first == own; });
    if (it == store_runs_.end()) {
      store_runs_.emplace_back(own, static_cast<uint32_t>(shared_store_->Covered(req.blocks.subspan(own))));
      it = store_runs_.end() - 1;
    }
    reach_[i] = std::max(reach_[i], own + it->second);
  }
}

CostSample DispatchSample(const RouteDecision& d, const Candidate& chosen, int64_t input_tokens) {
  return CostSample{.uncached = std::max<int64_t>(0, input_tokens - d.expected_cached_tokens),
                    .cached = d.expected_cached_tokens,
                    .queued = chosen.load.queued_prefill_tokens,
                    .slot_waits = SlotWaits(chosen)};
}

double Router::WaitSeconds(const Candidate& c) {
  if (c.cost == nullptr) return static_cast<double>(c.load.queued_prefill_tokens) * 1e-6;
  return c.cost->QueueSeconds(c.load.queued_prefill_tokens) + c.cost->SlotWaitSeconds(SlotWaits(c));
}

double Router::DisplacementSeconds(const RouteRequest& req, const Candidate& c) const {
  if (engine_caches_ == nullptr || options_.evict_return_probability <= 0) return 0;
  const int64_t lost = engine_caches_->DisplacedTokens(c.holder, req.blocks);
  if (lost <= 0) return 0;
  // What the displaced prompt's next turn pays: computing those tokens instead of reading them.
  const double recompute = c.cost->PrefillSeconds(lost, 0) - c.cost->PrefillSeconds(0, lost);
  // How likely it comes back: learned from the displacements seen, the option its prior.
  return engine_caches_->ReturnProbability(options_.evict_return_probability) * std::max(recompute, 0.0);
}

int Router::PickAmongTies(const RouteRequest& req, double best_score) {
  // Equal within the tolerance (at least up to rounding: identical units at the same load
  // estimate the same TTFT, but the sums that make it need not round alike).
  const double limit = best_score + std::max({best_score * options_.tie_tolerance, NanosToSeconds(options_.tie_tolerance_abs),
                                              best_score * 1e-9, 1e-12});
  tied_.clear();
  int64_t most_cached = -1;
  for (size_t i = 0; i < estimates_.size(); ++i) {
    if (estimates_[i].score > limit) continue;
    // The longest cached prefix among the near-equal: keep a prefix where it is.
    if (estimates_[i].cached > most_cached) {
      most_cached = estimates_[i].cached;
      tied_.clear();
    }
    if (estimates_[i].cached == most_cached) tied_.push_back(static_cast<int>(i));
  }
  if (tied_.size() == 1) return tied_[0];
  // The prompt's last full block names its whole cacheable prefix, so the same prompt lands on
  // the same unit (a repeat sent before the engine's KV events arrive still hits) and distinct
  // prompts spread evenly. A prompt without a full block has nothing to cache: rotate.
  const uint64_t key = req.blocks.empty() ? tie_counter_++ : Mix64(req.blocks.back());
  return tied_[key % tied_.size()];
}

RouteDecision Router::Route(const RouteRequest& req, std::span<const Candidate> entry,
                            std::span<const Candidate> decode, Rng& rng) {
  RouteDecision d;
  const int64_t bt = options_.block_tokens;
  auto cached_tokens = [&](int64_t blocks) { return std::min(blocks * bt, std::max<int64_t>(req.input_tokens - 1, 0)); };

  if (options_.policy == RoutingPolicy::kRandom || options_.policy == RoutingPolicy::kRoundRobin ||
      options_.policy == RoutingPolicy::kLeastLoaded) {
    d.entry = balancer_->Pick(LoadView(entry, &Candidate::load).with_ranking(entry_ranking_), Phase::kPrefill, rng);
  } else {
    MatchAll(req, entry);
    int best_holder = -1;
    for (size_t i = 0; i < entry.size(); ++i) {
      if (entry[i].load.available && matched_[i] > 0 &&
          (best_holder < 0 || matched_[i] > matched_[static_cast<size_t>(best_holder)])) {
        best_holder = static_cast<int>(i);
      }
    }
    const int64_t best_blocks = best_holder >= 0 ? matched_[static_cast<size_t>(best_holder)] : 0;
    auto queue_s = [&](size_t i) { return WaitSeconds(entry[i]); };
    if (options_.policy == RoutingPolicy::kPrefixOnly) {
      // Longest prefix; ties (and no match at all) go to the least queued.
      int pick = -1;
      for (size_t i = 0; i < entry.size(); ++i) {
        if (!entry[i].load.available) continue;
        if (pick < 0) { pick = static_cast<int>(i); continue; }
        const size_t p = static_cast<size_t>(pick);
        if (matched_[i] > matched_[p] ||
            (matched_[i] == matched_[p] && entry[i].load.queued_prefill_tokens < entry[p].load.queued_prefill_tokens)) {
          pick = static_cast<int>(i);
        }
      }
      if (pick >= 0 && options_.spread_hot_prefixes && matched_[static_cast<size_t>(pick)] > 0 &&
          queue_s(static_cast<size_t>(pick)) > options_.hot_queue_seconds) {
        // The holder is saturated: send the request to the least queued unit and copy the prefix.
        int alt = -1;
        for (size_t i = 0; i < entry.size(); ++i) {
          if (!entry[i].load.available || static_cast<int>(i) == pick) continue;
          if (alt < 0 || entry[i].load.queued_prefill_tokens < entry[static_cast<size_t>(alt)].load.queued_prefill_tokens) {
            alt = static_cast<int>(i);
          }
        }
        if (alt >= 0 && queue_s(static_cast<size_t>(alt)) < queue_s(static_cast<size_t>(pick))) {
          d.hot_spot = true;
          d.fetch_from = pick;
          d.fetch_blocks = matched_[static_cast<size_t>(pick)] - matched_[static_cast<size_t>(alt)];
          if (d.fetch_blocks <= 0) d.fetch_from = -1, d.fetch_blocks = 0;
          pick = alt;
        }
      }
      d.entry = pick;
      if (pick >= 0) {
        d.expected_cached_tokens = cached_tokens(d.fetch_from >= 0 ? best_blocks : matched_[static_cast<size_t>(pick)]);
      }
    } else {
      // kv-aware: minimum estimated TTFT plus what the placement displaces; ties spread
      // (PickAmongTies).
      double best_ttft = std::numeric_limits<double>::infinity();
      double best_score = std::numeric_limits<double>::infinity();
      estimates_.assign(entry.size(), Estimate{});
      for (size_t i = 0; i < entry.size(); ++i) {
        const Candidate& c = entry[i];
        if (!c.load.available || c.cost == nullptr) continue;
        const int64_t own = cached_tokens(matched_[i]);
        const TierPrice tiers =
            PriceTiers(*c.cost, queue_s(i), req.input_tokens, own, cached_tokens(reach_[i]),
                       c.store_path != nullptr ? *c.store_path : options_.store);
        double ttft = tiers.ttft_s;
        int fetch_from = -1;
        int64_t fetch_blocks = 0, cached = own + tiers.store_tokens, store = tiers.store_tokens;
        if (options_.spread_hot_prefixes && best_blocks > static_cast<int64_t>(matched_[i])) {
          const int64_t far = cached_tokens(best_blocks);
          const double bytes = static_cast<double>(far - own) * c.cost->kv_bytes_per_token();
          const double with_fetch = queue_s(i) + c.cost->PrefillSeconds(req.input_tokens - far, far) +
                                    NanosToSeconds(options_.fetch_latency) + bytes / options_.fetch_bytes_per_s;
          if (with_fetch < ttft) {
            ttft = with_fetch;
            fetch_from = best_holder;
            fetch_blocks = best_blocks - matched_[i];
            cached = far;
            store = 0;
          }
        }
        const double score = ttft + DisplacementSeconds(req, c);
        estimates_[i] = Estimate{ttft, score, fetch_from, fetch_blocks, cached, store};
        best_ttft = std::min(best_ttft, ttft);
        best_score = std::min(best_score, score);
      }
      if (best_score < std::numeric_limits<double>::infinity()) {
        d.entry = PickAmongTies(req, best_score);
        const Estimate& e = estimates_[static_cast<size_t>(d.entry)];
        d.fetch_from = e.fetch_from;
        d.fetch_blocks = e.fetch_blocks;
        d.expected_cached_tokens = e.cached;
        d.expected_store_tokens = e.store;
      }
      d.estimated_ttft_s = d.entry >= 0 ? estimates_[static_cast<size_t>(d.entry)].ttft : 0;
      if (d.entry >= 0 && options_.reject_factor > 0 &&
          best_ttft > options_.reject_factor * NanosToSeconds(options_.ttft_slo)) {
        d.rejected = true;
        d.reason = "ttft_slo_unattainable";
        d.entry = -1;
        return d;
      }
    }
    if (d.entry >= 0 && best_holder >= 0 && d.entry != best_holder &&
        matched_[static_cast<size_t>(d.entry)] < static_cast<uint32_t>(best_blocks)) {
      d.hot_spot = true;
    }
  }
  if (d.entry < 0) {
    d.rejected = true;
    d.reason = "no_available_unit";
    return d;
  }
  if (d.estimated_ttft_s == 0) {
    // Load-only and prefix-only policies do not rank by it, but admission control and reports
    // still want the estimate.
    const Candidate& c = entry[static_cast<size_t>(d.entry)];
    if (c.cost != nullptr) {
      d.estimated_ttft_s = WaitSeconds(c) + c.cost->PrefillSeconds(req.input_tokens - d.expected_cached_tokens, d.expected_cached_tokens);
    }
  }
  if (!decode.empty()) {
    const int64_t uncached = req.input_tokens - d.expected_cached_tokens;
    d.decode = PickDecode(decode, rng);
    if (d.decode < 0) {
      d.rejected = true;
      d.reason = "no_decode_unit";
      d.entry = -1;
      return d;
    }
    if (options_.disagg_min_uncached > 0 && uncached <= options_.disagg_min_uncached) {
      // Too little to prefill to be worth a hand-off: the decode unit does it itself.
      d.entry = -1;
      d.fetch_from = -1;
      d.fetch_blocks = 0;
      d.expected_store_tokens = 0;  // the decode unit's store tier was not matched
    }
  }
  return d;
}

}  // namespace myriad::policy
