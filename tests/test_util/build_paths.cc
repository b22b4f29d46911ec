// The one test file that names this build's paths (see build_paths.h).
#include "build_paths.h"

namespace myriad::test {
const char* MyriadBinaryPath() { return MYRIAD_BINARY_PATH; }
const char* MyriadSourceDir() { return MYRIAD_SOURCE_DIR_PATH; }
}  // namespace myriad::test
