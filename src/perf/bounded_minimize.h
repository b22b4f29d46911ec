#pragma once
// A small, deterministic derivative-free minimiser over a box: Nelder-Mead in coordinates scaled
// to [0, 1] per dimension, every trial point clamped into the box, restarted from the best point
// so that a simplex collapsed against a bound or a kink of a roofline gets a fresh start.
#include <functional>
#include <vector>

namespace myriad::perf {

struct MinimizeOptions {
  int max_evaluations = 4000;
  int restarts = 3;            // fresh simplices around the best point after the first
  double initial_step = 0.15;  // of each dimension's range
  double tolerance = 1e-12;    // stop a simplex when its values spread less than this
};

struct MinimizeResult {
  std::vector<double> x;
  double value = 0;
  int evaluations = 0;
};

// Minimises f over lo <= x <= hi starting from x0 (clamped). lo, hi and x0 have one entry per
// dimension and lo < hi. The same inputs give the same result.
MinimizeResult MinimizeBounded(const std::function<double(const std::vector<double>&)>& f,
                               const std::vector<double>& lo, const std::vector<double>& hi,
                               const std::vector<double>& x0, const MinimizeOptions& options = {});

}  // namespace myriad::perf
