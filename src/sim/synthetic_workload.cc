#include "sim/synthetic_workload.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <numbers>
#include <span>
#include <utility>

#include <fmt/format.h>

#include "core/block_hash.h"
#include "core/rng.h"
#include "core/slab.h"

namespace myriad::sim {
namespace {

// splitmix64's finalizer: a bijection, so absorbing one word at a time never merges two
// different inputs that share a prefix.
inline uint64_t Mix(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// A run of tokens with one identity: a system prompt, a user message or a model output.
struct Segment {
  uint64_t id;
  int32_t tokens;
};

constexpr uint64_t kBlockSeed = 0x5e67a3d1c0ffee11ULL;
// Ids of messages and outputs start above every system prompt's id.
constexpr uint64_t kFirstDynamicSegment = uint64_t{1} << 48;

// Keys the full blocks of a prompt, one segment at a time. A block's content id absorbs every
// (segment, offset, length) piece it covers, so equal segment sequences give equal keys and a
// block straddling a shared and a unique segment is unique, as in an engine.
struct BlockKeyer {
  BlockKey parent = kRootBlockKey;
  uint64_t content = kBlockSeed;
  int fill = 0;

  void Absorb(const Segment& seg, int block_tokens, BlockList& out) {
    int32_t offset = 0;
    while (offset < seg.tokens) {
      const int32_t take = std::min(block_tokens - fill, seg.tokens - offset);
      content = Mix(content + seg.id);
      content = Mix(content + (static_cast<uint64_t>(offset) << 32 | static_cast<uint32_t>(take)));
      offset += take;
      fill += take;
      if (fill == block_tokens) {
        parent = HashContentBlock(parent, content);
        out.push_back(parent);
        content = kBlockSeed;
        fill = 0;
      }
    }
  }
};

// A system prompt is always a prompt's first segment, so its blocks' keys and the keyer's
// state after it are the same in every prompt that starts with it: computed once, copied after.
struct SystemKeys {
  BlockList keys;
  BlockKeyer after;
  int32_t tokens = -1;  // the system prompt's length; -1: not met yet
};

// Keys the full blocks of a prompt made of `segments`. `system` (one entry per system prompt,
// by id - 1) holds the keys of system prompts met before; null: none cached.
void KeyBlocks(std::span<const Segment> segments, int block_tokens, int32_t total_tokens,
               std::vector<SystemKeys>* system, BlockList& out) {
  out.reserve(static_cast<size_t>(total_tokens / block_tokens));
  BlockKeyer keyer;
  if (system != nullptr && !segments.empty() && segments[0].id - 1 < system->size()) {
    SystemKeys& sys = (*system)[segments[0].id - 1];
    if (sys.tokens != segments[0].tokens) {
      sys.keys.clear();
      keyer.Absorb(segments[0], block_tokens, sys.keys);
      sys.after = keyer;
      sys.tokens = segments[0].tokens;
    }
    out.insert(out.end(), sys.keys.begin(), sys.keys.end());
    keyer = sys.after;
    segments = segments.subspan(1);
  }
  for (const Segment& seg : segments) keyer.Absorb(seg, block_tokens, out);
}

class LengthSampler {
 public:
  explicit LengthSampler(const LengthDist& d) : dist_(d) {
    // Lognormal moments: cv^2 = exp(sigma^2) - 1, mean = exp(mu + sigma^2 / 2).
    sigma_ = std::sqrt(std::log1p(d.cv * d.cv));
    mu_ = std::log(d.mean) - sigma_ * sigma_ / 2;
  }
  int32_t Draw(Rng& rng) const {
    const double x = sigma_ > 0 ? rng.LogNormal(mu_, sigma_) : dist_.mean;
    return static_cast<int32_t>(
        std::clamp<double>(std::round(x), dist_.min, static_cast<double>(dist_.max)));
  }

 private:
  LengthDist dist_;
  double mu_ = 0;
  double sigma_ = 0;
};

std::optional<FieldError> CheckLength(const LengthDist& d, const std::string& path) {
  auto bad = [&](std::string_view field, std::string what) {
    return FieldError{fmt::format("{}.{}", path, field), std::move(what)};
  };
  if (!(d.mean > 0) || !std::isfinite(d.mean)) return bad("mean", fmt::format("must be > 0, got {}", d.mean));
  if (!(d.cv >= 0) || !std::isfinite(d.cv)) return bad("cv", fmt::format("must be >= 0, got {}", d.cv));
  if (d.min < 1) return bad("min", fmt::format("must be >= 1, got {}", d.min));
  if (d.max < d.min) return bad("max", fmt::format("must be >= min ({}), got {}", d.min, d.max));
  if (d.max > kMaxTokens) return bad("max", fmt::format("must be at most {} tokens, got {}", kMaxTokens, d.max));
  return std::nullopt;
}

}  // namespace

// The burst's times stay far inside the nanosecond clock (the scenario's own bound).
constexpr Nanos kMaxBurstTime = 10'000 * kHour;

std::optional<FieldError> CheckSyntheticOptions(const SyntheticOptions& o) {
  auto bad = [](const char* field, std::string what) { return FieldError{field, std::move(what)}; };
  auto in01 = [](double x) { return x >= 0 && x <= 1; };
  if (!(o.rate > 0) || !std::isfinite(o.rate)) return bad("workload.rate", fmt::format("must be > 0, got {}", o.rate));
  if (o.arrival != "poisson" && o.arrival != "gamma") {
    return bad("workload.arrival", fmt::format("must be poisson or gamma, got '{}'", o.arrival));
  }
  if (o.arrival == "gamma" && (!(o.burst_cv > 0) || !std::isfinite(o.burst_cv))) {
    return bad("workload.burst_cv", fmt::format("must be > 0, got {}", o.burst_cv));
  }
  if (!in01(o.diurnal_amplitude)) {
    return bad("workload.diurnal.amplitude", fmt::format("must be in [0, 1], got {}", o.diurnal_amplitude));
  }
  if (o.diurnal_amplitude > 0 && o.diurnal_period <= 0) {
    return bad("workload.diurnal.period", fmt::format("must be > 0, got {}", FormatDuration(o.diurnal_period)));
  }
  if (!std::isfinite(o.diurnal_phase)) {
    return bad("workload.diurnal.phase", fmt::format("must be finite, got {}", o.diurnal_phase));
  }
  for (auto [dist, path] : {std::pair{&o.input, "workload.input"}, std::pair{&o.output, "workload.output"},
                            std::pair{&o.turn_tokens, "workload.sessions.turn_tokens"}}) {
    if (auto e = CheckLength(*dist, path)) return e;
  }
  if (!in01(o.system_prompt_fraction)) {
    return bad("workload.system_prompts.fraction", fmt::format("must be in [0, 1], got {}", o.system_prompt_fraction));
  }
  if (o.system_prompts < 0) {
    return bad("workload.system_prompts.count", fmt::format("must be >= 0, got {}", o.system_prompts));
  }
  if (o.system_prompt_fraction > 0 && o.system_prompts < 1) {
    return bad("workload.system_prompts.count", "must be >= 1 when system_prompts.fraction > 0, got 0");
  }
  // One length per tenant and prompt is held for the whole run.
  constexpr int64_t kMaxSystemPrompts = 10'000'000;
  if (int64_t{o.system_prompts} * std::max(o.tenants, 1) > kMaxSystemPrompts) {
    return bad("workload.system_prompts.count",
               fmt::format("{} prompts x {} tenant(s) is more than the maximum of {} system prompts", o.system_prompts,
                           o.tenants, kMaxSystemPrompts));
  }
  if (!(o.system_prompt_zipf >= 0) || !std::isfinite(o.system_prompt_zipf)) {
    return bad("workload.system_prompts.zipf", fmt::format("must be >= 0, got {}", o.system_prompt_zipf));
  }
  if (o.system_prompt_fraction > 0 && (o.system_prompt_tokens < 1 || o.system_prompt_tokens > kMaxTokens)) {
    return bad("workload.system_prompts.tokens",
               fmt::format("must be between 1 and {}, got {}", kMaxTokens, o.system_prompt_tokens));
  }
  if (!in01(o.session_fraction)) {
    return bad("workload.sessions.fraction", fmt::format("must be in [0, 1], got {}", o.session_fraction));
  }
  if (!(o.turns_mean >= 1) || !std::isfinite(o.turns_mean)) {
    return bad("workload.sessions.turns_mean", fmt::format("must be >= 1, got {}", o.turns_mean));
  }
  if (o.session_fraction > 0 && o.think_time_mean <= 0) {
    return bad("workload.sessions.think_time", fmt::format("must be > 0, got {}", FormatDuration(o.think_time_mean)));
  }
  if (o.block_tokens < 1) return bad("kv_block_tokens", fmt::format("must be >= 1, got {}", o.block_tokens));
  if (o.duration < 0) return bad("duration", fmt::format("must be >= 0, got {}", FormatDuration(o.duration)));
  if (o.tenants < 1) return bad("workload.tenants.weights", fmt::format("must list at least 1 tenant, got {}", o.tenants));
  if (!o.tenant_weights.empty()) {
    if (o.tenant_weights.size() != static_cast<size_t>(o.tenants)) {
      return bad("workload.tenants.weights", fmt::format("must have {} entries (one per tenant), got {}", o.tenants,
                                                         o.tenant_weights.size()));
    }
    double sum = 0;
    for (double w : o.tenant_weights) {
      if (!(w >= 0) || !std::isfinite(w)) return bad("workload.tenants.weights", fmt::format("must be >= 0, got {}", w));
      sum += w;
    }
    if (!(sum > 0)) return bad("workload.tenants.weights", "must not all be 0");
  }
  if (!(o.burst_factor >= 1 && o.burst_factor <= 100)) {
    return bad("workload.burst.factor", fmt::format("must be in [1, 100], got {}", o.burst_factor));
  }
  for (const auto& [key, v] : {std::pair{"workload.burst.start", o.burst_start},
                               std::pair{"workload.burst.duration", o.burst_duration},
                               std::pair{"workload.burst.ramp", o.burst_ramp}}) {
    if (v < 0 || v > kMaxBurstTime) {
      return bad(key, fmt::format("must be between 0s and {}, got {}", FormatDuration(kMaxBurstTime), FormatDuration(v)));
    }
  }
  if (o.duration > 0) {
    // Counted before anything is allocated: the peak rate over the whole duration, with the
    // follow-up turns that sessions add.
    const double turns = 1 + o.session_fraction * (o.turns_mean - 1);
    const double burst = (o.burst_factor - 1) * o.rate * NanosToSeconds(o.burst_duration + o.burst_ramp);
    const double expected = (o.rate * (1 + o.diurnal_amplitude) * NanosToSeconds(o.duration) + burst) * turns;
    if (!(expected <= kMaxSimulatedRequests)) {
      return bad("workload.rate",
                 fmt::format("{:.6g}/s for {} is about {:.3g} requests, more than the simulator's maximum of {:.0e}", o.rate,
                             FormatDuration(o.duration), expected, kMaxSimulatedRequests));
    }
  }
  return std::nullopt;
}

namespace {

absl::Status Validate(const SyntheticOptions& o) {
  if (auto e = CheckSyntheticOptions(o)) return absl::InvalidArgumentError(fmt::format("{}: {}", e->field, e->what));
  return absl::OkStatus();
}

class SyntheticWorkload final : public Workload {
 public:
  explicit SyntheticWorkload(SyntheticOptions o)
      : o_(std::move(o)),
        // One stream per concern, so changing e.g. the session options does not move the
        // arrival times or the single requests' lengths.
        arrival_rng_(Rng(o_.seed).Fork(1)),
        length_rng_(Rng(o_.seed).Fork(2)),
        prompt_rng_(Rng(o_.seed).Fork(3)),
        session_rng_(Rng(o_.seed).Fork(4)),
        tenant_rng_(Rng(o_.seed).Fork(5)),
        input_(o_.input),
        output_(o_.output),
        turn_(o_.turn_tokens),
        continue_p_(1.0 - 1.0 / o_.turns_mean),
        gamma_(o_.arrival == "gamma"),
        system_zipf_(static_cast<uint64_t>(std::max(o_.system_prompts, 0)), o_.system_prompt_zipf) {
    Rng sys_rng = Rng(o_.seed).Fork(6);
    // Leave room for at least input.min tokens of user message under input.max. A fixed
    // length (input.min = input.max) leaves none: the system prompt is then a prefix of the
    // prompt and one token is the user's, so no prompt is ever longer than input.max.
    user_floor_ = o_.input.max > o_.input.min ? o_.input.min : 1;
    const int32_t cap = o_.input.max - user_floor_;
    if (o_.system_prompt_fraction > 0 && cap >= 1) {
      system_lengths_.resize(static_cast<size_t>(o_.tenants) * o_.system_prompts);
      for (int32_t& len : system_lengths_) {
        len = static_cast<int32_t>(std::clamp(
            std::round(sys_rng.Uniform(0.5, 1.5) * o_.system_prompt_tokens), 1.0, static_cast<double>(cap)));
      }
      system_keys_.resize(system_lengths_.size());
    }
    if (!o_.tenant_weights.empty()) {
      double sum = 0;
      for (double w : o_.tenant_weights) tenant_cdf_.push_back(sum += w);
      for (double& c : tenant_cdf_) c /= sum;
    }
    if (o_.diurnal_amplitude > 0) {
      const double period_s = NanosToSeconds(o_.diurnal_period);
      omega_ = 2 * std::numbers::pi / period_s;
      theta0_ = 2 * std::numbers::pi * o_.diurnal_phase;
      cos_theta0_ = std::cos(theta0_);
      swing_ = o_.diurnal_amplitude / omega_;
    }
    AdvanceFresh();
    if (o_.burst_factor > 1 && o_.burst_duration + o_.burst_ramp > 0) {
      burst_done_ = false;
      AdvanceBurst();
    }
  }

  std::optional<Request> Next() override {
    // The burst's arrivals are new arrivals too, merged by time (the wave's first on a tie).
    const bool burst_next = !burst_done_ && (fresh_done_ || next_burst_ < next_fresh_);
    const bool all_fresh_done = fresh_done_ && burst_done_;
    const Nanos fresh_at = burst_next ? next_burst_ : next_fresh_;
    const bool turn_first =
        !turn_heap_.empty() && (all_fresh_done || turn_heap_.front().arrival <= fresh_at);
    if (turn_first) {
      std::pop_heap(turn_heap_.begin(), turn_heap_.end(), LaterTurn{});
      Turn turn = turns_.Take(turn_heap_.back().slot);
      turn_heap_.pop_back();
      Request req = Emit(turn.arrival, turn.tenant, turn.input_tokens, turn.output_tokens,
                         turn.segments);
      ScheduleNextTurn(std::move(turn.segments), req);
      return req;
    }
    if (all_fresh_done) return std::nullopt;
    if (burst_next) {
      const Nanos at = next_burst_;
      AdvanceBurst();
      return Fresh(at);
    }
    const Nanos at = next_fresh_;
    AdvanceFresh();
    return Fresh(at);
  }

 private:
  // A follow-up turn of a session, waiting for its arrival.
  struct Turn {
    Nanos arrival;
    uint32_t tenant;
    int32_t input_tokens;
    int32_t output_tokens;
    std::vector<Segment> segments;
  };
  // The turn heap holds only what orders it and where the turn lies: tens of thousands of
  // sessions wait at once, and a heap of whole turns moved 56-byte records and missed the
  // cache on most of its levels.
  struct TurnRef {
    Nanos arrival;
    uint64_t seq;  // ties at one instant resolve in scheduling order
    uint32_t slot;  // in turns_
  };
  // A type, not a function: the heap algorithms inline its calls.
  struct LaterTurn {
    bool operator()(const TurnRef& a, const TurnRef& b) const {
      return a.arrival != b.arrival ? a.arrival > b.arrival : a.seq > b.seq;
    }
  };

  // The intensity's integral: Lambda(t) = t + (a/omega)(cos(theta0) - cos(omega t + theta0)),
  // in units of 1/rate. Arrivals of the undisturbed process at u map to Lambda^-1(u).
  double Lambda(double t) const {
    return t + swing_ * (cos_theta0_ - std::cos(omega_ * t + theta0_));
  }

  // Safeguarded Newton on the monotone Lambda, bracketed by |Lambda(t) - t| <= 2 * swing_.
  double InvertLambda(double u) const {
    double lo = std::max(last_fresh_s_, u - 2 * swing_);
    double hi = u + 2 * swing_;
    const double tolerance = std::max(1e-10, std::abs(u) * 1e-15);
    double t = lo;
    for (int i = 0; i < 100 && hi - lo > tolerance; ++i) {
      const double f = Lambda(t) - u;
      if (std::abs(f) <= tolerance) break;
      (f < 0 ? lo : hi) = t;
      const double slope = 1 + o_.diurnal_amplitude * std::sin(omega_ * t + theta0_);
      double next = slope > 1e-12 ? t - f / slope : lo;
      if (!(next > lo && next < hi)) next = (lo + hi) / 2;
      t = next;
    }
    return t;
  }

  void AdvanceFresh() {
    const double gap = gamma_
                           ? arrival_rng_.Gamma(1 / (o_.burst_cv * o_.burst_cv),
                                                o_.burst_cv * o_.burst_cv / o_.rate)
                           : arrival_rng_.Exponential(o_.rate);
    fresh_clock_s_ += gap;
    const double t = std::max(last_fresh_s_, swing_ > 0 ? InvertLambda(fresh_clock_s_)
                                                         : fresh_clock_s_);
    last_fresh_s_ = t;
    next_fresh_ = SecondsToNanos(t);
    if (o_.duration > 0 && next_fresh_ >= o_.duration) fresh_done_ = true;
  }

  // The burst's extra intensity is a trapezoid of height A = (factor - 1) x rate: its integral
  // E(t) is piecewise quadratic, inverted in closed form at each unit-rate arrival.
  void AdvanceBurst() {
    burst_clock_ += burst_rng_.Exponential(1.0);
    const double a = (o_.burst_factor - 1) * o_.rate;
    const double s = NanosToSeconds(o_.burst_start), r = NanosToSeconds(o_.burst_ramp),
                 d = NanosToSeconds(o_.burst_duration);
    const double up = a * r / 2, plateau = up + a * d, total = plateau + a * r / 2;
    double t;
    if (burst_clock_ >= total) {
      burst_done_ = true;
      return;
    } else if (burst_clock_ < up) {
      t = s + std::sqrt(2 * r * burst_clock_ / a);
    } else if (burst_clock_ < plateau) {
      t = s + r + (burst_clock_ - up) / a;
    } else {
      t = s + r + d + r - std::sqrt(std::max(0.0, r * r - 2 * r * (burst_clock_ - plateau) / a));
    }
    next_burst_ = SecondsToNanos(t);
    if (o_.duration > 0 && next_burst_ >= o_.duration) burst_done_ = true;
  }

  uint32_t PickTenant() {
    if (o_.tenants == 1) return 0;
    const double u = tenant_rng_.Uniform();
    if (tenant_cdf_.empty()) return static_cast<uint32_t>(u * o_.tenants);
    auto it = std::upper_bound(tenant_cdf_.begin(), tenant_cdf_.end(), u);
    return static_cast<uint32_t>(std::min<size_t>(it - tenant_cdf_.begin(), o_.tenants - 1));
  }

  Request Fresh(Nanos at) {
    const uint32_t tenant = PickTenant();
    int32_t total = input_.Draw(length_rng_);
    const int32_t output = output_.Draw(length_rng_);
    std::array<Segment, 2> segments{};
    size_t n = 0;
    if (!system_lengths_.empty() && prompt_rng_.Bernoulli(o_.system_prompt_fraction)) {
      const uint64_t rank = system_zipf_(prompt_rng_);
      const size_t index = static_cast<size_t>(tenant) * o_.system_prompts + rank;
      const int32_t system_len = system_lengths_[index];
      total = std::max(total, system_len + user_floor_);
      segments[n++] = {1 + index, system_len};
    }
    segments[n] = {next_segment_++, total - (n ? segments[0].tokens : 0)};
    ++n;
    const std::span<const Segment> prompt(segments.data(), n);
    Request req = Emit(at, tenant, total, output, prompt);
    if (o_.session_fraction > 0 && session_rng_.Bernoulli(o_.session_fraction)) {
      ScheduleNextTurn(std::vector<Segment>(prompt.begin(), prompt.end()), req);
    }
    return req;
  }

  Request Emit(Nanos at, uint32_t tenant, int32_t input, int32_t output,
               std::span<const Segment> segments) {
    Request req;
    req.id = next_id_++;
    req.arrival = at;
    req.input_tokens = input;
    req.output_tokens = output;
    req.tenant = tenant;
    KeyBlocks(segments, o_.block_tokens, input, &system_keys_, req.blocks);
    return req;
  }

  // Decides whether the session that just emitted `prev` goes on, and if so queues its next
  // turn: the previous prompt, its output and a new user message.
  void ScheduleNextTurn(std::vector<Segment> segments, const Request& prev) {
    if (!session_rng_.Bernoulli(continue_p_)) return;
    const double think_s = session_rng_.Exponential(1.0 / NanosToSeconds(o_.think_time_mean));
    const Nanos at = prev.arrival + SecondsToNanos(think_s);
    const int32_t message = turn_.Draw(session_rng_);
    const int32_t output = output_.Draw(session_rng_);
    if (o_.duration > 0 && at >= o_.duration) return;
    const int64_t input = int64_t{prev.input_tokens} + prev.output_tokens + message;
    if (input > o_.input.max) return;  // the context window is full: the user starts over
    segments.push_back({next_segment_++, prev.output_tokens});
    segments.push_back({next_segment_++, message});
    const uint32_t slot = turns_.Put(Turn{at, prev.tenant, static_cast<int32_t>(input), output, std::move(segments)});
    turn_heap_.push_back(TurnRef{at, next_turn_seq_++, slot});
    std::push_heap(turn_heap_.begin(), turn_heap_.end(), LaterTurn{});
  }

  const SyntheticOptions o_;
  Rng arrival_rng_, length_rng_, prompt_rng_, session_rng_, tenant_rng_;
  const LengthSampler input_, output_, turn_;
  const double continue_p_;
  const bool gamma_;
  const ZipfSampler system_zipf_;        // of a system prompt's rank
  std::vector<int32_t> system_lengths_;  // [tenant * system_prompts + rank]; empty: none
  std::vector<SystemKeys> system_keys_;  // the same index: keys of the system prompts met so far
  int32_t user_floor_ = 1;               // tokens of user message after a system prompt
  std::vector<double> tenant_cdf_;
  double omega_ = 0, theta0_ = 0, swing_ = 0;  // diurnal curve; swing_ = 0 when flat
  double cos_theta0_ = 1;
  double fresh_clock_s_ = 0;  // the undisturbed arrival process's clock
  double last_fresh_s_ = 0;
  Nanos next_fresh_ = 0;
  bool fresh_done_ = false;
  Rng burst_rng_{Rng(o_.seed).Fork(7)};
  double burst_clock_ = 0;  // the burst stream's unit-rate clock
  Nanos next_burst_ = 0;
  bool burst_done_ = true;
  Slab<Turn> turns_;                 // the waiting turns
  std::vector<TurnRef> turn_heap_;   // min-heap by (arrival, seq) of the waiting turns
  uint64_t next_turn_seq_ = 0;
  uint64_t next_segment_ = kFirstDynamicSegment;
  uint64_t next_id_ = 0;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Workload>> MakeSyntheticWorkload(SyntheticOptions options) {
  if (absl::Status s = Validate(options); !s.ok()) return s;
  return std::make_unique<SyntheticWorkload>(std::move(options));
}

}  // namespace myriad::sim
