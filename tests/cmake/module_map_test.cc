// The module map (cmake/modules.cmake) as the test command enforces it: cmake/check_includes.cmake
// run over small trees made up here, the way ctest's `module_map` test runs it over src/.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "../cli/run_myriad.h"

namespace myriad::testing {
namespace {

namespace fs = std::filesystem;

// Writes `files` (path below src/ -> text) into a tree of the test's own and checks it.
CommandResult CheckTree(const std::string& name, const std::map<std::string, std::string>& files) {
  const fs::path src = TestTempDir() / name / "src";
  fs::remove_all(src.parent_path());
  for (const auto& [path, text] : files) {
    fs::create_directories((src / path).parent_path());
    std::ofstream(src / path) << text;
  }
  return RunShell(std::string(MYRIAD_CMAKE_COMMAND) + " -P " + MYRIAD_SOURCE_DIR +
                  "/cmake/check_includes.cmake " + src.string());
}

TEST(ModuleMap, TheSourceTreeFollowsIt) {
  const CommandResult r = RunShell(std::string(MYRIAD_CMAKE_COMMAND) + " -P " + MYRIAD_SOURCE_DIR +
                                   "/cmake/check_includes.cmake " + MYRIAD_SOURCE_DIR + "/src");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("every include allowed"), std::string::npos) << r.out;
}

TEST(ModuleMap, AllowedIncludesPass) {
  const CommandResult r = CheckTree("allowed", {
      {"core/time.h", "#pragma once\n#include <cstdint>\n"},
      {"policy/router.h", "#pragma once\n#include \"core/time.h\"\n#include \"absl/status/status.h\"\n"},
      // sim uses policy, which uses perf, which uses core: all three are sim's to include.
      {"sim/unit.cc", "#include \"sim/unit.h\"\n#include \"unit_inl.h\"\n#include <vector>\n"
                      "#include <yaml-cpp/yaml.h>\n#include \"policy/router.h\"\n#include \"core/time.h\"\n"},
      {"sim/unit.h", "#pragma once\n"},
      {"sim/unit_inl.h", "#pragma once\n"},
      {"net/http.cc", "#include <boost/asio/ip/tcp.hpp>\n#include <zmq.hpp>\n#include <thread>\n"},
  });
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("module map: 6 files, every include allowed"), std::string::npos) << r.out;
}

TEST(ModuleMap, AForbiddenModuleIncludeFailsNamingFileLineAndWhatIsAllowed) {
  const CommandResult r = CheckTree("edge", {
      {"policy/x.h", "#pragma once\n// a decision\n#include \"sim/y.h\"\n"},
      {"sim/y.h", "#pragma once\n#include \"net/http.h\"\n"},
      {"net/http.h", "#pragma once\n"},
  });
  EXPECT_NE(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("src/policy/x.h:3 includes sim/y.h: policy may use core, perf\n"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("src/sim/y.h:2 includes net/http.h: sim may use core, perf, policy, kvstore_core\n"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("2 include(s) cross the module map"), std::string::npos) << r.out;
}

TEST(ModuleMap, OnlyNetIncludesAsioAndZmq) {
  const CommandResult r = CheckTree("third_party", {
      {"policy/a.cc", "#include <boost/asio.hpp>\n"},
      {"sim/b.cc", "#include <zmq.hpp>\n"},
      {"gateway/c.cc", "#include <asio.hpp>\n#include <yaml-cpp/yaml.h>\n"},
  });
  EXPECT_NE(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("src/policy/a.cc:1 includes <boost/asio.hpp> (boost): policy may include absl, fmt"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("src/sim/b.cc:1 includes <zmq.hpp> (zmq): sim may include"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("src/gateway/c.cc:1 includes <asio.hpp> (asio): gateway may include"), std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("src/gateway/c.cc:2"), std::string::npos) << r.out;
}

TEST(ModuleMap, PolicyIncludesNoThreadsClockOrFiles) {
  const CommandResult r = CheckTree("pure", {
      {"policy/a.cc", "#include <vector>\n#include <thread>\n#include <chrono>\n#include <fstream>\n"},
  });
  EXPECT_NE(r.code, 0) << r.out;
  for (const char* h : {"<thread>", "<chrono>", "<fstream>"}) {
    EXPECT_NE(r.out.find(std::string("includes ") + h + ": policy may not include thread, mutex"),
              std::string::npos)
        << h << "\n" << r.out;
  }
  EXPECT_EQ(r.out.find("<vector>"), std::string::npos) << r.out;
}

TEST(ModuleMap, UnknownModulesAndHeadersFail) {
  const CommandResult r = CheckTree("unknown", {
      {"unmapped/a.cc", "\n"},
      {"core/b.cc", "#include <grpc/grpc.h>\n#include \"missing.h\"\n"},
  });
  EXPECT_NE(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("src/unmapped/a.cc: module 'unmapped' is not in the module map (cmake/modules.cmake)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("src/core/b.cc:1 includes <grpc/grpc.h>: no module or library of the module map"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("src/core/b.cc:2 includes missing.h: no module or library"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace myriad::testing
