// Where this build's binary and the source tree are. Force-included into every test file
// (CMakeLists.txt); the paths themselves are compiled into build_paths.cc alone, so a test object
// does not depend on its work tree's location and ccache shares it between work trees.
#pragma once

namespace myriad::test {
const char* MyriadBinaryPath();
const char* MyriadSourceDir();
}  // namespace myriad::test

#define MYRIAD_BINARY (::myriad::test::MyriadBinaryPath())
#define MYRIAD_SOURCE_DIR (::myriad::test::MyriadSourceDir())
