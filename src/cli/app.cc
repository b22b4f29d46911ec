#include "cli/app.h"

#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>
#include <new>
#include <string>
#include <string_view>

#include "cli/calibrate_command.h"
#include "cli/control_command.h"
#include "cli/diagnose_command.h"
#include "cli/emu_command.h"
#include "cli/eplb_command.h"
#include "cli/gateway_command.h"
#include "cli/huge_pages.h"
#include "cli/incident_command.h"
#include "cli/kvstore_command.h"
#include "cli/loadgen_command.h"
#include "cli/plan_command.h"
#include "cli/sim_command.h"
#include "cli/tokenize_command.h"
#include "cli/twin_command.h"
#include "cli/up_command.h"

namespace myriad::cli {

int Main(int argc, char** argv) {
  if (argc > 1 && std::string_view(argv[1]) == "sim") ReexecWithHugePages(argv);
  CLI::App app{"Myriad: the infrastructure around LLM inference engines on 10,000-GPU clusters"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "myriad 0.1.0");
  SimCommand sim(app);
  EplbCommand eplb(app);
  KvstoreCommand kvstore(app);
  EmuCommand emu(app);
  GatewayCommand gateway(app);
  UpCommand up(app);
  ControlCommand control(app);
  LoadgenCommand loadgen(app);
  TokenizeCommand tokenize(app);
  TwinCommand twin(app);
  DiagnoseCommand diagnose(app);
  CalibrateCommand calibrate(app);
  IncidentCommand incident(app);
  PlanCommand plan(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // CLI11's own codes (105, 106, 109...) would break the README's contract: every parse
    // error is bad input; --help and --version come here too, with code 0.
    return app.exit(e) == 0 ? 0 : 2;
  }
  const std::string name = app.get_subcommands().empty() ? "" : app.get_subcommands().front()->get_name();
  // A safety net, not the way input errors are reported (those are checked and exit 2): an
  // exception that escapes a command still ends the process with a message, not an abort.
  try {
    if (sim.selected()) return sim.Run();
    if (eplb.selected()) return eplb.Run();
    if (kvstore.selected()) return kvstore.Run();
    if (emu.selected()) return emu.Run();
    if (gateway.selected()) return gateway.Run();
    if (up.selected()) return up.Run();
    if (control.selected()) return control.Run();
    if (loadgen.selected()) return loadgen.Run();
    if (tokenize.selected()) return tokenize.Run();
    if (twin.selected()) return twin.Run();
    if (diagnose.selected()) return diagnose.Run();
    if (calibrate.selected()) return calibrate.Run();
    if (incident.selected()) return incident.Run();
    if (plan.selected()) return plan.Run();
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "myriad %s: out of memory\n", name.c_str());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "myriad %s: %s\n", name.c_str(), e.what());
    return 1;
  }
  return 0;
}

}  // namespace myriad::cli
