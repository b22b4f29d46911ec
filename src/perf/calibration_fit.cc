#include "perf/calibration_fit.h"

#include <algorithm>
#include <cmath>

#include "perf/bounded_minimize.h"

namespace myriad::perf {

const char* FitMetricName(FitMetric m) {
  switch (m) {
    case FitMetric::kTtft: return "ttft";
    case FitMetric::kItl: return "itl";
    case FitMetric::kLatency: return "latency";
    case FitMetric::kLinearOps: return "vidur_linear";
  }
  return "?";
}

void HoldOutEveryFourth(std::span<FitSample> samples) {
  std::array<int, kFitMetrics> seen{};
  for (FitSample& s : samples) s.held_out = ++seen[static_cast<int>(s.metric)] % 4 == 0;
}

namespace {

double Positions(double new_tokens, double cached) {
  // Token j of a prompt attends to the cached prefix and the j tokens before it.
  return new_tokens * cached + new_tokens * (new_tokens + 1) / 2;
}

double DecodeStep(const StepModel& m, double seqs, double context) {
  BatchShape b;
  b.decode_seqs = static_cast<int64_t>(seqs);
  b.decode_context = static_cast<int64_t>(seqs * context);
  return m.Breakdown(b).total_s;
}

// One GQA layer of the sample's own dimensions, without embeddings, under m's GPU and calibration.
double LinearOpsSeconds(const StepModel& m, const FitSample& s) {
  ModelSpec layer;
  layer.layers = layer.dense_layers = 1;
  layer.hidden = s.layer.hidden;
  layer.heads = s.layer.heads;
  layer.kv_heads = s.layer.kv_heads;
  layer.head_dim = s.layer.hidden / s.layer.heads;
  layer.dense_ffn = s.layer.ffn;
  layer.weight_bytes = 2;  // Vidur profiles in FP16/BF16
  auto unit = StepModel::Create(m.gpu(), layer, UnitLayout{.tp = s.layer.tp}, m.fabric(), m.calibration());
  if (!unit.ok()) return 0;  // the reader checks the shape; an unbuildable one predicts nothing
  BatchShape b;
  b.prefill_tokens = s.input_tokens;
  // The GEMMs alone: no sequences (so no LM head) and nothing else of the step.
  return unit->Breakdown(b).dense_s;
}

}  // namespace

double PredictSeconds(const StepModel& m, const FitSample& s) {
  const double in = static_cast<double>(s.input_tokens), out = static_cast<double>(s.output_tokens);
  const double c = static_cast<double>(std::max<int64_t>(s.concurrency, 1));
  switch (s.metric) {
    case FitMetric::kTtft: {
      BatchShape b;
      b.prefill_tokens = s.input_tokens;
      b.prefill_seqs = 1;
      b.prefill_attended = Positions(in, 0);
      b.decode_seqs = static_cast<int64_t>(c) - 1;
      b.decode_context = static_cast<int64_t>((c - 1) * (in + out / 2));
      return m.Breakdown(b).total_s;
    }
    case FitMetric::kItl:
      return DecodeStep(m, c, in + out / 2);
    case FitMetric::kLatency: {
      BatchShape b;
      b.prefill_tokens = static_cast<int64_t>(c * in);
      b.prefill_seqs = static_cast<int64_t>(c);
      b.prefill_attended = c * Positions(in, 0);
      const double decode_steps = std::max(out - 1, 0.0);
      return m.Breakdown(b).total_s + decode_steps * DecodeStep(m, c, in + out / 2);
    }
    case FitMetric::kLinearOps:
      return LinearOpsSeconds(m, s);
  }
  return 0;
}

namespace {

struct Param {
  const char* name;
  double lo, hi;
  double (*get)(const Calibration&);
  void (*set)(Calibration&, double);
};

std::vector<Param> FreeParameters(const UnitLayout& layout, const Fabric& fabric, const FitBounds& b) {
  std::vector<Param> p = {
      {"gemm_efficiency", b.min_efficiency, b.max_efficiency, [](const Calibration& c) { return c.gemm_efficiency; },
       [](Calibration& c, double v) { c.gemm_efficiency = v; }},
      {"attention_efficiency", b.min_efficiency, b.max_efficiency,
       [](const Calibration& c) { return c.attention_efficiency; },
       [](Calibration& c, double v) { c.attention_efficiency = v; }},
      {"hbm_efficiency", b.min_efficiency, b.max_efficiency, [](const Calibration& c) { return c.hbm_efficiency; },
       [](Calibration& c, double v) { c.hbm_efficiency = v; }},
      {"step_overhead", 0.0, b.max_step_overhead_s,
       [](const Calibration& c) { return NanosToSeconds(c.step_overhead); },
       [](Calibration& c, double v) { c.step_overhead = SecondsToNanos(v); }},
  };
  // A parameter that changes no prediction would wander: comm_efficiency scales the NIC alone,
  // which only an expert group wider than a node uses (TP all-reduces and AllToAlls within a
  // node ride NVLink); every collective pays comm_latency.
  if (layout.ep > fabric.gpus_per_node) {
    p.push_back({"comm_efficiency", b.min_efficiency, b.max_efficiency,
                 [](const Calibration& c) { return c.comm_efficiency; },
                 [](Calibration& c, double v) { c.comm_efficiency = v; }});
  }
  if (layout.tp > 1 || layout.ep > 1) {
    p.push_back({"comm_latency", 0.0, b.max_comm_latency_s,
                 [](const Calibration& c) { return NanosToSeconds(c.comm_latency); },
                 [](Calibration& c, double v) { c.comm_latency = SecondsToNanos(v); }});
  }
  return p;
}

ErrorSummary Summarise(std::vector<double> errors) {
  ErrorSummary s;
  s.count = static_cast<int>(errors.size());
  if (errors.empty()) return s;
  std::sort(errors.begin(), errors.end());
  const size_t n = errors.size();
  s.median = n % 2 ? errors[n / 2] : (errors[n / 2 - 1] + errors[n / 2]) / 2;
  s.max = errors.back();
  return s;
}

void Score(const StepModel& m, std::span<const FitSample> samples, std::array<ErrorSummary, kFitMetrics>& in,
           std::array<ErrorSummary, kFitMetrics>& out) {
  std::array<std::vector<double>, kFitMetrics> e_in, e_out;
  for (const FitSample& s : samples) {
    const double e = std::abs(PredictSeconds(m, s) - s.measured_s) / s.measured_s;
    (s.held_out ? e_out : e_in)[static_cast<int>(s.metric)].push_back(e);
  }
  for (int k = 0; k < kFitMetrics; ++k) in[k] = Summarise(std::move(e_in[k])), out[k] = Summarise(std::move(e_out[k]));
}

}  // namespace

absl::StatusOr<FitReport> FitCalibration(const GpuSpec& gpu, const ModelSpec& model, const UnitLayout& layout,
                                         const Fabric& fabric, std::span<const FitSample> samples,
                                         const Calibration& start, const FitBounds& bounds) {
  std::vector<const FitSample*> fit;
  for (const FitSample& s : samples) {
    if (!s.held_out) fit.push_back(&s);
  }
  if (fit.empty()) return absl::InvalidArgumentError("no sample left to fit to (all are held out)");
  auto start_model = StepModel::Create(gpu, model, layout, fabric, start);
  if (!start_model.ok()) return start_model.status();

  std::array<double, kFitMetrics> per_metric{};
  for (const FitSample* s : fit) ++per_metric[static_cast<int>(s->metric)];
  const int metrics = static_cast<int>(std::count_if(per_metric.begin(), per_metric.end(), [](double n) { return n > 0; }));

  const std::vector<Param> params = FreeParameters(layout, fabric, bounds);
  std::vector<double> lo, hi, x0;
  for (const Param& p : params) {
    lo.push_back(p.lo), hi.push_back(p.hi), x0.push_back(std::clamp(p.get(start), p.lo, p.hi));
  }
  auto with = [&](const std::vector<double>& x) {
    Calibration c = start;
    for (size_t i = 0; i < params.size(); ++i) params[i].set(c, x[i]);
    return c;
  };
  auto objective = [&](const std::vector<double>& x) {
    // The unit was built once above with these GPU, model and layout, and the parameters
    // changed here do not decide whether it fits, so this Create cannot fail.
    const StepModel m = *StepModel::Create(gpu, model, layout, fabric, with(x));
    std::array<double, kFitMetrics> sum{};
    for (const FitSample* s : fit) {
      const double r = (PredictSeconds(m, *s) - s->measured_s) / s->measured_s;
      sum[static_cast<int>(s->metric)] += r * r;
    }
    double total = 0;
    for (int k = 0; k < kFitMetrics; ++k) {
      if (per_metric[k] > 0) total += sum[k] / per_metric[k];
    }
    return total / metrics;
  };
  const MinimizeResult r = MinimizeBounded(objective, lo, hi, x0);

  FitReport report;
  report.fitted = with(r.x);
  report.evaluations = r.evaluations;
  for (const Param& p : params) report.free_parameters.push_back(p.name);
  Score(*start_model, samples, report.start_in_sample, report.start_out_of_sample);
  const StepModel fitted = *StepModel::Create(gpu, model, layout, fabric, report.fitted);
  Score(fitted, samples, report.in_sample, report.out_of_sample);
  return report;
}

}  // namespace myriad::perf
