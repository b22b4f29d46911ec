#pragma once
// A writer of the Prometheus text exposition format, version 0.0.4
// (https://prometheus.io/docs/instrumenting/exposition_formats/): one HELP and one TYPE line per
// metric family, then its samples, label values escaped. Only counters and gauges: the servers
// keep their distributions elsewhere and export quantiles as gauges when they need to.
//
// Callers keep label cardinality bounded (operation kinds, error types, states), never ids of
// requests, keys or nodes: every distinct label set is a time series in Prometheus.
#include <cstdint>
#include <initializer_list>
#include <set>
#include <string>
#include <string_view>
#include <span>
#include <utility>
#include <vector>

namespace myriad::net {

// The Content-Type of an exposition.
inline constexpr std::string_view kPrometheusContentType = "text/plain; version=0.0.4; charset=utf-8";

enum class MetricType { kCounter, kGauge, kUntyped, kHistogram };

// A histogram's per-bucket counts (not cumulative) over fixed upper bounds; the last count is
// the overflow bucket (+Inf). Not thread-safe: the owner locks.
struct HistogramCounts {
  std::vector<double> bounds;
  std::vector<uint64_t> counts;
  double sum = 0;
  void Observe(double value);
};

using Label = std::pair<std::string_view, std::string_view>;

// Keeps a label's set of values bounded when the values come from outside (requests, a
// registry): the first `cap` distinct values keep their own series, later ones are counted
// under kOther. Not thread-safe: the owner locks.
class BoundedLabel {
 public:
  static constexpr std::string_view kOther = "other";
  explicit BoundedLabel(size_t cap) : cap_(cap) {}
  // The value to export for `value`; valid as long as this object.
  std::string_view Get(std::string_view value);
  size_t size() const { return seen_.size(); }

 private:
  size_t cap_;
  std::set<std::string, std::less<>> seen_;
};

class PrometheusWriter {
 public:
  // Starts a family: its HELP and TYPE lines. Samples that follow belong to it. A name that is
  // not a valid metric name has its invalid characters replaced by '_'.
  void Family(std::string_view name, std::string_view help, MetricType type);
  // A sample of the current family (or of `name` in it, e.g. a _total suffix; by the text
  // format's rules the sample name must start with the family's name).
  void Sample(std::string_view name, std::initializer_list<Label> labels, double value);
  void Sample(std::string_view name, std::initializer_list<Label> labels, uint64_t value);
  void Sample(std::string_view name, std::initializer_list<Label> labels, int64_t value);

  // Shorthand for a family with one unlabelled sample.
  void Counter(std::string_view name, std::string_view help, uint64_t value);
  void Gauge(std::string_view name, std::string_view help, double value);
  // A histogram's samples for one label set: cumulative _bucket samples with "le", then _sum
  // and _count; preceded by the family's HELP and TYPE lines when `family` (each family has
  // them once, so further label sets of it pass false).
  void Histogram(std::string_view name, std::string_view help, std::initializer_list<Label> labels,
                 const HistogramCounts& h, bool family = true);

  const std::string& text() const { return out_; }
  std::string Take() { return std::move(out_); }

  // Escapes for a label value: backslash, double quote and line feed.
  static std::string EscapeLabelValue(std::string_view value);
  // Escapes for HELP text: backslash and line feed.
  static std::string EscapeHelp(std::string_view help);
  // Go's float formatting as Prometheus reads it: NaN, +Inf, -Inf, else the shortest decimal.
  static std::string FormatValue(double value);

 private:
  void Name(std::string_view name, bool label);
  void Labels(std::span<const Label> labels);

  std::string out_;
};

}  // namespace myriad::net
