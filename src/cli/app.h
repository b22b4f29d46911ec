#pragma once

namespace myriad::cli {

// Parses the command line and runs a subcommand; returns the process exit code.
int Main(int argc, char** argv);

}  // namespace myriad::cli
