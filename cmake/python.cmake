# The Python module myriad_store (src/pystore, docs/kvstore-python.md) and its tests, included
# by CMakeLists.txt when MYRIAD_PYTHON is ON.
#
# A Python extension is a shared object, and Debian's GCC compiles the main targets as PIE,
# which cannot be linked into one; so the modules the extension needs (kvstore and what it uses,
# per cmake/modules.cmake) are compiled once more as position-independent code, and the main
# targets (the simulator's hot loops) keep their flags.
#
# The interpreter is Debian's /usr/bin/python3 unless Python3_EXECUTABLE says otherwise: a
# pyenv python3 on PATH has other headers and ABI than Debian's pybind11 and python3-dev.

# myriad_<name>_pic: myriad_<name>'s sources, flags and dependencies, position-independent, linked
# to the _pic copies of the modules it uses.
function(myriad_pic_module name)
  if(TARGET myriad_${name}_pic)
    return()
  endif()
  get_property(uses GLOBAL PROPERTY MYRIAD_MODULE_${name}_USES)
  foreach(u IN LISTS uses)
    myriad_pic_module(${u})
  endforeach()
  get_target_property(srcs myriad_${name} SOURCES)
  add_library(myriad_${name}_pic STATIC EXCLUDE_FROM_ALL ${srcs})
  set_target_properties(myriad_${name}_pic PROPERTIES POSITION_INDEPENDENT_CODE ON)
  foreach(prop INCLUDE_DIRECTORIES INTERFACE_INCLUDE_DIRECTORIES COMPILE_DEFINITIONS
               INTERFACE_COMPILE_DEFINITIONS COMPILE_OPTIONS)
    get_target_property(v myriad_${name} ${prop})
    if(v)
      set_target_properties(myriad_${name}_pic PROPERTIES ${prop} "${v}")
    endif()
  endforeach()
  foreach(prop LINK_LIBRARIES INTERFACE_LINK_LIBRARIES)
    get_target_property(v myriad_${name} ${prop})
    if(v)
      list(TRANSFORM v REPLACE "^myriad_([a-z_]+)$" "myriad_\\1_pic")
      list(TRANSFORM v REPLACE "^\\$<LINK_ONLY:myriad_([a-z_]+)>$" "$<LINK_ONLY:myriad_\\1_pic>")
      set_target_properties(myriad_${name}_pic PROPERTIES ${prop} "${v}")
    endif()
  endforeach()
endfunction()

if(NOT DEFINED Python3_EXECUTABLE AND EXISTS /usr/bin/python3)
  set(Python3_EXECUTABLE /usr/bin/python3 CACHE FILEPATH "The python3 the module is built for")
endif()
find_package(Python3 3.8 COMPONENTS Interpreter Development.Module)
find_package(pybind11 2.10 CONFIG QUIET)
if(NOT Python3_FOUND OR NOT pybind11_FOUND)
  message(FATAL_ERROR "MYRIAD_PYTHON is ON but pybind11 and Python 3's headers were not found "
                      "(Debian: pybind11-dev python3-dev, installed by scripts/setup.sh); "
                      "configure with -DMYRIAD_PYTHON=OFF to build without the Python module")
endif()

myriad_pic_module(kvstore)
file(GLOB pystore_srcs CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/src/pystore/*.cc)
# NO_EXTRAS: no LTO and no strip, so the module links quickly against the static libraries.
pybind11_add_module(myriad_store MODULE NO_EXTRAS ${pystore_srcs})
target_link_libraries(myriad_store PRIVATE myriad_kvstore_pic)
set_target_properties(myriad_store PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/python)

if(MYRIAD_BUILD_TESTS)
  # The Python tests start `myriad kvstore master` and `node` processes on loopback and call
  # the store through the module, with the interpreter the module was built for.
  add_test(NAME python_store
           COMMAND ${Python3_EXECUTABLE} -m unittest discover -v
                   -s ${CMAKE_CURRENT_SOURCE_DIR}/tests/pystore -p "test_*.py")
  set_tests_properties(python_store PROPERTIES
    TIMEOUT 300
    ENVIRONMENT "PYTHONPATH=$<TARGET_FILE_DIR:myriad_store>;MYRIAD_BINARY=$<TARGET_FILE:myriad>")
endif()
