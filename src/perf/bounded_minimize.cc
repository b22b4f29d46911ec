#include "perf/bounded_minimize.h"

#include <algorithm>
#include <numeric>

namespace myriad::perf {
namespace {

struct Scaled {
  const std::function<double(const std::vector<double>&)>& f;
  const std::vector<double>& lo;
  const std::vector<double>& hi;
  int evaluations = 0;

  std::vector<double> ToX(const std::vector<double>& u) const {
    std::vector<double> x(u.size());
    for (size_t i = 0; i < u.size(); ++i) x[i] = lo[i] + std::clamp(u[i], 0.0, 1.0) * (hi[i] - lo[i]);
    return x;
  }
  double operator()(std::vector<double>& u) {
    for (double& v : u) v = std::clamp(v, 0.0, 1.0);
    ++evaluations;
    return f(ToX(u));
  }
};

// One Nelder-Mead run (reflection 1, expansion 2, contraction 1/2, shrink 1/2) from best_u,
// leaving the best point it saw there.
void Simplex(Scaled& g, std::vector<double>& best_u, double& best_f, const MinimizeOptions& o) {
  const size_t d = best_u.size();
  std::vector<std::vector<double>> pts(d + 1, best_u);
  std::vector<double> vals(d + 1);
  vals[0] = best_f;
  for (size_t i = 0; i < d; ++i) {
    // Step into the box: a vertex clamped onto its neighbour would flatten the simplex.
    pts[i + 1][i] += best_u[i] + o.initial_step <= 1.0 ? o.initial_step : -o.initial_step;
    vals[i + 1] = g(pts[i + 1]);
  }
  std::vector<size_t> order(d + 1);
  while (g.evaluations < o.max_evaluations) {
    std::iota(order.begin(), order.end(), size_t{0});
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return vals[a] < vals[b]; });
    const size_t b = order.front(), w = order.back(), sw = order[d - 1];
    if (vals[w] - vals[b] < o.tolerance) break;
    std::vector<double> centroid(d, 0.0);
    for (size_t k = 0; k < d; ++k) {  // all but the worst, order[d]
      for (size_t i = 0; i < d; ++i) centroid[i] += pts[order[k]][i] / static_cast<double>(d);
    }
    auto along = [&](double t) {
      std::vector<double> p(d);
      for (size_t i = 0; i < d; ++i) p[i] = centroid[i] + t * (pts[w][i] - centroid[i]);
      return p;
    };
    std::vector<double> r = along(-1.0);
    const double fr = g(r);
    if (fr < vals[b]) {
      std::vector<double> e = along(-2.0);
      const double fe = g(e);
      if (fe < fr) pts[w] = e, vals[w] = fe;
      else pts[w] = r, vals[w] = fr;
    } else if (fr < vals[sw]) {
      pts[w] = r, vals[w] = fr;
    } else {
      std::vector<double> c = fr < vals[w] ? along(-0.5) : along(0.5);
      const double fc = g(c);
      if (fc < std::min(fr, vals[w])) {
        pts[w] = c, vals[w] = fc;
      } else {
        for (size_t k = 0; k <= d; ++k) {
          if (k == b) continue;
          for (size_t i = 0; i < d; ++i) pts[k][i] = pts[b][i] + 0.5 * (pts[k][i] - pts[b][i]);
          vals[k] = g(pts[k]);
        }
      }
    }
  }
  for (size_t k = 0; k <= d; ++k) {
    if (vals[k] < best_f) best_f = vals[k], best_u = pts[k];
  }
}

}  // namespace

MinimizeResult MinimizeBounded(const std::function<double(const std::vector<double>&)>& f,
                               const std::vector<double>& lo, const std::vector<double>& hi,
                               const std::vector<double>& x0, const MinimizeOptions& options) {
  Scaled g{f, lo, hi};
  std::vector<double> u(x0.size());
  for (size_t i = 0; i < u.size(); ++i) u[i] = (x0[i] - lo[i]) / (hi[i] - lo[i]);
  double best = g(u);
  MinimizeOptions o = options;
  for (int run = 0; run <= options.restarts && g.evaluations < options.max_evaluations; ++run) {
    Simplex(g, u, best, o);
    o.initial_step = std::max(o.initial_step * 0.5, 0.01);
  }
  return {g.ToX(u), best, g.evaluations};
}

}  // namespace myriad::perf
