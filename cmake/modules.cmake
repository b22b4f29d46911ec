# The module map: for each module under src/, the modules it may use and the third-party
# libraries whose headers it may include (docs/modules.md). This is the one place an edge is
# allowed: CMakeLists.txt links each module's library to the modules it USES, and
# cmake/check_includes.cmake (the ctest test `module_map`) fails on any #include that crosses
# the map. Read by both with include(), so it only declares.
#
# myriad_map_module(<module> [USES <module>...] [EXTERNAL <library>...] [DENY_STD <header>...])
#   USES      the modules it builds on; what they use is usable too (policy USES perf, so it
#             may include core/ as well). Libraries link in this order.
#   EXTERNAL  the third-party libraries (myriad_map_external below) whose headers it includes.
#   DENY_STD  standard headers it must not include.
# myriad_map_external(<library> <regex>...)
#   The include paths that belong to a library, as regexes over the text between <> or "".
#   An include that is neither a module's, a library's nor a standard header's fails the check.
# myriad_map_exception(<module> <library> <file regex> <why>)
#   Lets the module's files whose path (below src/<module>/) matches include that library: a
#   known debt, listed by the check on every run until it is paid.

function(myriad_map_module name)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "" "USES;EXTERNAL;DENY_STD")
  set_property(GLOBAL APPEND PROPERTY MYRIAD_MODULES ${name})
  set_property(GLOBAL PROPERTY MYRIAD_MODULE_${name}_USES ${arg_USES})
  set_property(GLOBAL PROPERTY MYRIAD_MODULE_${name}_EXTERNAL ${arg_EXTERNAL})
  set_property(GLOBAL PROPERTY MYRIAD_MODULE_${name}_DENY_STD ${arg_DENY_STD})
endfunction()

function(myriad_map_external name)
  set_property(GLOBAL APPEND PROPERTY MYRIAD_EXTERNALS ${name})
  set_property(GLOBAL PROPERTY MYRIAD_EXTERNAL_${name} ${ARGN})
endfunction()

function(myriad_map_exception module library file_regex why)
  get_property(n GLOBAL PROPERTY MYRIAD_EXCEPTIONS)
  list(LENGTH n i)
  set_property(GLOBAL APPEND PROPERTY MYRIAD_EXCEPTIONS ${i})
  set_property(GLOBAL PROPERTY MYRIAD_EXCEPTION_${i}_MODULE "${module}")
  set_property(GLOBAL PROPERTY MYRIAD_EXCEPTION_${i}_LIBRARY "${library}")
  set_property(GLOBAL PROPERTY MYRIAD_EXCEPTION_${i}_FILES "${file_regex}")
  set_property(GLOBAL PROPERTY MYRIAD_EXCEPTION_${i}_WHY "${why}")
endfunction()

# Third-party libraries, by the paths of their headers.
myriad_map_external(absl "^absl/")
myriad_map_external(fmt "^fmt/")
myriad_map_external(yaml "^yaml-cpp/")
myriad_map_external(json "^nlohmann/")
myriad_map_external(xxhash "^xxhash\\.h$")
myriad_map_external(boost "^boost/")
myriad_map_external(asio "^asio(\\.hpp)?$" "^asio/")
myriad_map_external(zmq "^zmq(_addon)?\\.hpp$" "^zmq\\.h$")
myriad_map_external(icu "^unicode/")
myriad_map_external(pcre2 "^pcre2\\.h$")
myriad_map_external(cli11 "^CLI/")
myriad_map_external(pybind11 "^pybind11/")
myriad_map_external(posix "^(sys|arpa|netinet)/" "^(unistd|fcntl|poll|sched|pthread|signal|netdb|dlfcn)\\.h$")
myriad_map_external(simd "^(x86intrin|immintrin|emmintrin|smmintrin|nmmintrin|arm_neon)\\.h$")

# The modules, as ARCHITECTURE.md draws them: core <- perf <- policy <- sim; policy <- gateway,
# kvstore, each also <- net; policy <- emu <- net (the emulator schedules with policy/batch_planner); core <- tokenizer <- {gateway, emu};
# kvstore <- emu (the emulated engine's second tier, emu/kv_store_tier.h, is a store client);
# cli -> everything. Only net speaks Asio and ZMQ.
myriad_map_module(core EXTERNAL absl fmt xxhash yaml posix)
myriad_map_module(perf USES core EXTERNAL absl fmt)
# Pure decisions: time comes in as `now`, randomness as a seeded core::Rng; no threads, clock
# reads or files.
myriad_map_module(policy USES perf EXTERNAL absl fmt
                  DENY_STD thread mutex shared_mutex condition_variable future atomic stop_token
                           semaphore latch barrier chrono ctime fstream iostream filesystem)
myriad_map_module(sim USES policy kvstore_core EXTERNAL absl fmt yaml json)
myriad_map_module(net USES core EXTERNAL absl fmt json boost asio zmq xxhash posix)
myriad_map_module(tokenizer USES core EXTERNAL absl fmt json icu pcre2 simd xxhash)
# The store's metadata core (object table, node registry, placement, leases, eviction, repair
# planning): pure, so the simulator runs the very object the master server runs.
myriad_map_module(kvstore_core USES core EXTERNAL absl fmt xxhash)
myriad_map_module(kvstore USES kvstore_core policy net EXTERNAL absl fmt json xxhash posix)
myriad_map_module(emu USES policy net tokenizer kvstore EXTERNAL absl fmt json xxhash)
myriad_map_module(gateway USES policy net tokenizer EXTERNAL absl fmt json yaml xxhash)
# The Python module myriad_store (cmake/python.cmake builds it, not as a static library).
myriad_map_module(pystore USES kvstore EXTERNAL absl fmt pybind11 xxhash)
# The controller: scrapes engines and the gateway, drives policy/fleet_controller.h, runs hooks.
myriad_map_module(control USES policy net EXTERNAL absl fmt json yaml posix)
myriad_map_module(cli USES sim kvstore kvstore_core emu gateway control tokenizer net policy perf core
                  EXTERNAL absl fmt json yaml cli11 posix)

myriad_map_exception(kvstore boost "^data_(conn|client|server)\\.(h|cc)$"
  "the store's binary data plane is written on Asio coroutines; it belongs in net")
