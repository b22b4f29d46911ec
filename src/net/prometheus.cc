#include "net/prometheus.h"

#include <algorithm>
#include <vector>

#include <fmt/format.h>

#include <cmath>

namespace myriad::net {

namespace {

bool NameChar(char c, bool first, bool label) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_') return true;
  if (c == ':' && !label) return true;
  return !first && c >= '0' && c <= '9';
}

}  // namespace

void PrometheusWriter::Name(std::string_view name, bool label) {
  if (name.empty()) {
    out_ += '_';
    return;
  }
  for (size_t i = 0; i < name.size(); ++i) {
    out_ += NameChar(name[i], i == 0, label) ? name[i] : '_';
  }
}

std::string PrometheusWriter::EscapeLabelValue(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '"': out += "\\\""; break;
      case '\n': out += "\\n"; break;
      default: out += c;
    }
  }
  return out;
}

std::string PrometheusWriter::EscapeHelp(std::string_view help) {
  std::string out;
  out.reserve(help.size());
  for (char c : help) {
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      default: out += c;
    }
  }
  return out;
}

std::string PrometheusWriter::FormatValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  return fmt::format("{}", value);
}

void PrometheusWriter::Family(std::string_view name, std::string_view help, MetricType type) {
  out_ += "# HELP ";
  Name(name, false);
  out_ += ' ';
  out_ += EscapeHelp(help);
  out_ += "\n# TYPE ";
  Name(name, false);
  switch (type) {
    case MetricType::kCounter: out_ += " counter\n"; break;
    case MetricType::kGauge: out_ += " gauge\n"; break;
    case MetricType::kUntyped: out_ += " untyped\n"; break;
    case MetricType::kHistogram: out_ += " histogram\n"; break;
  }
}

void PrometheusWriter::Labels(std::span<const Label> labels) {
  if (labels.empty()) return;
  out_ += '{';
  bool first = true;
  for (const auto& [k, v] : labels) {
    if (!first) out_ += ',';
    first = false;
    Name(k, true);
    out_ += "=\"";
    out_ += EscapeLabelValue(v);
    out_ += '"';
  }
  out_ += '}';
}

void PrometheusWriter::Sample(std::string_view name, std::initializer_list<Label> labels,
                              double value) {
  Name(name, false);
  Labels({labels.begin(), labels.size()});
  out_ += ' ';
  out_ += FormatValue(value);
  out_ += '\n';
}

void PrometheusWriter::Sample(std::string_view name, std::initializer_list<Label> labels,
                              uint64_t value) {
  // Exact integers: a double would round counters above 2^53.
  Name(name, false);
  Labels({labels.begin(), labels.size()});
  fmt::format_to(std::back_inserter(out_), " {}\n", value);
}

void PrometheusWriter::Sample(std::string_view name, std::initializer_list<Label> labels,
                              int64_t value) {
  Name(name, false);
  Labels({labels.begin(), labels.size()});
  fmt::format_to(std::back_inserter(out_), " {}\n", value);
}

void PrometheusWriter::Counter(std::string_view name, std::string_view help, uint64_t value) {
  Family(name, help, MetricType::kCounter);
  Sample(name, {}, value);
}

void PrometheusWriter::Gauge(std::string_view name, std::string_view help, double value) {
  Family(name, help, MetricType::kGauge);
  Sample(name, {}, value);
}

void PrometheusWriter::Histogram(std::string_view name, std::string_view help,
                                 std::initializer_list<Label> labels,
                                 const HistogramCounts& h, bool family) {
  if (family) Family(name, help, MetricType::kHistogram);
  const std::string bucket = std::string(name) + "_bucket";
  uint64_t cumulative = 0;
  std::vector<Label> all(labels);
  all.emplace_back("le", "");
  for (size_t i = 0; i <= h.bounds.size(); ++i) {
    cumulative += i < h.counts.size() ? h.counts[i] : 0;
    const std::string le = i < h.bounds.size() ? FormatValue(h.bounds[i]) : "+Inf";
    all.back().second = le;
    Name(bucket, false);
    Labels(all);
    out_ += ' ';
    out_ += std::to_string(cumulative);
    out_ += '\n';
  }
  Sample(std::string(name) + "_sum", labels, h.sum);
  Sample(std::string(name) + "_count", labels, cumulative);
}

std::string_view BoundedLabel::Get(std::string_view value) {
  if (value == kOther) return kOther;
  auto it = seen_.find(value);
  if (it != seen_.end()) return *it;
  if (seen_.size() >= cap_) return kOther;
  return *seen_.emplace(value).first;
}

void HistogramCounts::Observe(double value) {
  const size_t i = static_cast<size_t>(
      std::lower_bound(bounds.begin(), bounds.end(), value) - bounds.begin());
  if (counts.size() != bounds.size() + 1) counts.assign(bounds.size() + 1, 0);
  counts[i]++;
  sum += value;
}

}  // namespace myriad::net
