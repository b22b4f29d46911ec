#include "cli/app.h"

#include <CLI/CLI.hpp>

namespace myriad::cli {

int Main(int argc, char** argv) {
  CLI::App app{"Myriad: infrastructure for LLM inference on 10,000-GPU clusters"};
  app.require_subcommand(1);
  CLI11_PARSE(app, argc, argv);
  return 0;
}

}  // namespace myriad::cli
