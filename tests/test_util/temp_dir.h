#pragma once
// Each test's own temporary directory.
#include <stdlib.h>

#include <filesystem>
#include <string>

namespace myriad::testing {

// A directory of this test process's own (ctest runs each test in a process of its own, so
// each test), made on first use under $TMPDIR (or /tmp) and removed with what it holds when
// the process exits: two runs of the suite at once never share a file.
inline const std::filesystem::path& TestTempDir() {
  struct Dir {
    std::filesystem::path path;
    Dir() {
      std::string tmpl = (std::filesystem::temp_directory_path() / "myriad_test_XXXXXX").string();
      if (mkdtemp(tmpl.data()) != nullptr) path = tmpl;
    }
    ~Dir() {
      std::error_code ec;
      if (!path.empty()) std::filesystem::remove_all(path, ec);
    }
  };
  static Dir dir;
  return dir.path;
}

}  // namespace myriad::testing
