#pragma once
// `myriad eplb --loads FILE --replicas N --gpus N [--groups N --nodes N]`: computes DeepSeek's
// expert-parallel placement (policy/eplb.h) for per-layer expert loads read from a CSV (one row
// per layer, optional header line) or JSON (array of arrays) file, and prints the placement and
// the GPU load imbalance before and after, as a table or JSON. Input errors exit with 2. With
// `--from-loads OLD` the unit is taken to run EPLB's placement for OLD, and what is printed is
// the incremental re-placement (policy/eplb_incremental.h) for --loads, with the slots it and a
// fresh placement would fetch.
#include <string>

#include <CLI/CLI.hpp>

namespace myriad::cli {

class EplbCommand {
 public:
  explicit EplbCommand(CLI::App& app);
  bool selected() const { return cmd_->parsed(); }
  int Run();

 private:
  CLI::App* cmd_;
  std::string loads_path_;
  int replicas_ = 0;
  int groups_ = 1;
  int nodes_ = 1;
  int gpus_ = 0;
  std::string format_ = "table";
  std::string ties_ = "stable";
  std::string from_loads_path_;
  double tolerance_ = 0.02;
};

}  // namespace myriad::cli
