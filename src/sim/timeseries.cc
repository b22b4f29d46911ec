#include "sim/timeseries.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace myriad::sim {

Nanos EffectiveSampleInterval(Nanos requested, Nanos horizon, size_t max_points) {
  const auto points = static_cast<Nanos>(std::max<size_t>(max_points, 1));
  Nanos interval = std::max<Nanos>(requested, 1);
  if (horizon / interval >= points) {
    interval = horizon / points + 1;
    // Whole seconds read better on an axis and in a CSV than 1.800000001 s.
    if (interval >= kSecond) interval = (interval + kSecond - 1) / kSecond * kSecond;
  }
  return interval;
}

std::string_view MarkerKindName(Marker::Kind k) {
  switch (k) {
    case Marker::Kind::kFault: return "fault";
    case Marker::Kind::kEjection: return "ejection";
    case Marker::Kind::kReadmission: return "readmission";
    case Marker::Kind::kStoreNodeLoss: return "store_node_loss";
    case Marker::Kind::kStoreNodeDeclaredDead: return "store_node_declared_dead";
  }
  return "unknown";
}

void TimeSeries::FinishMarkers() {
  std::stable_sort(markers.begin(), markers.end(), [](const Marker& a, const Marker& b) { return a.t_s < b.t_s; });
  for (SeriesPoint& p : points) p.faults = p.ejections = p.readmissions = p.store_node_losses = 0;
  for (const Marker& m : markers) {
    // Windows are (t - window, t]: the first whose end is at or after the marker.
    auto it = std::lower_bound(points.begin(), points.end(), m.t_s,
                               [](const SeriesPoint& p, double t) { return p.t_s < t; });
    if (it == points.end()) continue;  // after the last sample: outside the series
    switch (m.kind) {
      case Marker::Kind::kFault: ++it->faults; break;
      case Marker::Kind::kEjection: ++it->ejections; break;
      case Marker::Kind::kReadmission: ++it->readmissions; break;
      case Marker::Kind::kStoreNodeLoss: ++it->store_node_losses; break;
      case Marker::Kind::kStoreNodeDeclaredDead: break;
    }
  }
}

TimeSeriesSampler::TimeSeriesSampler(Nanos interval, std::vector<std::string> pools, std::vector<int> pool_units,
                                     double dollars_per_second, Nanos slo_ttft, Nanos slo_tpot)
    : interval_(interval), pool_units_(std::move(pool_units)), dollars_per_second_(dollars_per_second) {
  series_.interval_s = NanosToSeconds(interval);
  series_.slo_ttft_s = NanosToSeconds(slo_ttft);
  series_.slo_tpot_s = NanosToSeconds(slo_tpot);
  series_.pools = std::move(pools);
  prev_.pool_busy.assign(series_.pools.size(), 0);
}

void TimeSeriesSampler::OnComplete(double ttft_s, double tpot_s, bool good, int64_t good_tokens) {
  ++completed_;
  ttft_.Add(ttft_s);
  if (tpot_s >= 0) tpot_.Add(tpot_s);
  if (good) {
    ++good_;
    good_tokens_ += good_tokens;
  }
}

void TimeSeriesSampler::Sample(Nanos now, const ClusterGauges& g) {
  if (now <= last_) return;
  constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  const double span = NanosToSeconds(now - last_);
  SeriesPoint p;
  p.t_s = NanosToSeconds(now);
  p.window_s = span;
  p.arrived = arrived_;
  p.completed = completed_;
  p.rejected = rejected_;
  p.within_slo = good_;
  const Summary ttft = ttft_.Summarize(), tpot = tpot_.Summarize();
  p.ttft_p50_s = ttft.count ? ttft.p50 : kNaN;
  p.ttft_p99_s = ttft.count ? ttft.p99 : kNaN;
  p.tpot_p50_s = tpot.count ? tpot.p50 : kNaN;
  p.tpot_p99_s = tpot.count ? tpot.p99 : kNaN;
  const int64_t ended = completed_ + rejected_;
  p.slo_attainment = ended ? static_cast<double>(good_) / static_cast<double>(ended) : kNaN;
  p.goodput_tokens_per_s = static_cast<double>(good_tokens_) / span;
  p.cost_per_million_tokens_within_slo =
      good_tokens_ > 0 ? dollars_per_second_ * span / (static_cast<double>(good_tokens_) / 1e6) : kNaN;
  p.in_flight = g.in_flight;
  p.units_down = g.units_down;
  auto gbps = [span](double now_bytes, double before) { return (now_bytes - before) / 1e9 / span; };
  p.kv_handoff_gbps = gbps(g.kv_handoff_bytes, prev_.kv_handoff_bytes);
  p.kv_fetch_gbps = gbps(g.kv_fetch_bytes, prev_.kv_fetch_bytes);
  p.store_offload_gbps = gbps(g.store_offload_bytes, prev_.store_offload_bytes);
  p.store_load_gbps = gbps(g.store_load_bytes, prev_.store_load_bytes);
  p.store_repair_gbps = gbps(g.store_repair_bytes, prev_.store_repair_bytes);
  p.limiter_shed = g.limiter_shed - prev_.limiter_shed;
  p.rebalances = g.rebalances - prev_.rebalances;
  const size_t pools = series_.pools.size();
  p.pool_busy.resize(pools);
  for (size_t i = 0; i < pools; ++i) {
    const Nanos busy = i < g.pool_busy.size() ? g.pool_busy[i] - prev_.pool_busy[i] : 0;
    const double capacity = static_cast<double>(pool_units_[i]) * static_cast<double>(now - last_);
    // A step's time is counted when it ends, so a window may hold a little of the previous one.
    p.pool_busy[i] = capacity > 0 ? std::clamp(static_cast<double>(busy) / capacity, 0.0, 1.0) : 0.0;
  }
  p.pool_waiting = g.pool_waiting;
  p.pool_running = g.pool_running;
  p.pool_waiting.resize(pools);
  p.pool_running.resize(pools);
  series_.points.push_back(std::move(p));

  prev_ = g;
  prev_.pool_busy.resize(pools);
  last_ = now;
  arrived_ = rejected_ = completed_ = good_ = good_tokens_ = 0;
  ttft_ = Distribution();
  tpot_ = Distribution();
}

void TimeSeriesSampler::Close(Nanos now, const ClusterGauges& g) {
  if (now > last_ || series_.points.empty()) return Sample(std::max(now, last_ + 1), g);
  SeriesPoint& p = series_.points.back();
  p.rejected += rejected_;
  const int64_t ended = p.completed + p.rejected;
  if (ended > 0) p.slo_attainment = static_cast<double>(p.within_slo) / static_cast<double>(ended);
  rejected_ = 0;
}

namespace {

// RFC 4180: a field with a comma, a quote or a line break is quoted, its quotes doubled.
std::string CsvField(std::string_view s) {
  if (s.find_first_of(",\"\r\n") == std::string_view::npos) return std::string(s);
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

// Shortest text that reads back as the same double; an undefined value is an empty field.
std::string Num(double v) { return std::isfinite(v) ? fmt::format("{}", v) : std::string(); }

}  // namespace

void WriteSeriesCsv(std::ostream& out, std::span<const TimeSeries> runs) {
  std::string line =
      "variant,t_s,window_s,arrived,completed,rejected,within_slo,ttft_p50_s,ttft_p99_s,tpot_p50_s,tpot_p99_s,"
      "slo_attainment,goodput_tokens_per_s,cost_per_million_tokens_within_slo,in_flight,units_down,"
      "kv_handoff_gbps,kv_fetch_gbps,store_offload_gbps,store_load_gbps,store_repair_gbps,limiter_shed,rebalances,"
      "faults,ejections,readmissions,store_node_losses";
  const std::vector<std::string> no_pools;
  const std::vector<std::string>& pools = runs.empty() ? no_pools : runs.front().pools;
  for (const char* what : {"busy", "waiting", "running"}) {
    for (const std::string& pool : pools) {
      line += ',';
      line += CsvField(fmt::format("pool_{}:{}", what, pool));
    }
  }
  out << line << "\n";
  for (const TimeSeries& s : runs) {
    const std::string variant = CsvField(s.variant);
    for (const SeriesPoint& p : s.points) {
      line = fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}", variant,
                         Num(p.t_s), Num(p.window_s), p.arrived, p.completed, p.rejected, p.within_slo,
                         Num(p.ttft_p50_s), Num(p.ttft_p99_s), Num(p.tpot_p50_s), Num(p.tpot_p99_s),
                         Num(p.slo_attainment), Num(p.goodput_tokens_per_s),
                         Num(p.cost_per_million_tokens_within_slo), p.in_flight, p.units_down,
                         Num(p.kv_handoff_gbps), Num(p.kv_fetch_gbps), Num(p.store_offload_gbps),
                         Num(p.store_load_gbps), Num(p.store_repair_gbps), p.limiter_shed, p.rebalances, p.faults,
                         p.ejections, p.readmissions, p.store_node_losses);
      for (size_t i = 0; i < pools.size(); ++i) {
        line += ',';
        line += Num(i < p.pool_busy.size() ? p.pool_busy[i] : 0.0);
      }
      for (size_t i = 0; i < pools.size(); ++i) {
        line += fmt::format(",{}", i < p.pool_waiting.size() ? p.pool_waiting[i] : 0);
      }
      for (size_t i = 0; i < pools.size(); ++i) {
        line += fmt::format(",{}", i < p.pool_running.size() ? p.pool_running[i] : 0);
      }
      out << line << "\n";
    }
  }
}

}  // namespace myriad::sim
