# ci/test.sh runs ctest with "cpus" slots (a resource spec file: one and a half per core): every test holds one
# while it runs, except the few that spend their time waiting (ALLOCMARK_WAITING_SUITES in
# tests/CMakeLists.txt), which run beside the others. Every add_test in the tree sets it.
set(ALLOCMARK_USES_A_CPU RESOURCE_GROUPS cpus:1)

include(GoogleTest)
# One line per test: allocmark_test(foo_test foo_test.cpp LIBS lib... [PRECOMPILE <header>...])
# gtest.h is precompiled for every test binary; PRECOMPILE adds the heavy headers its files share.
function(allocmark_test name)
  cmake_parse_arguments(T "" "" "SOURCES;LIBS;PRECOMPILE" ${ARGN})
  add_executable(${name} ${T_SOURCES} ${T_UNPARSED_ARGUMENTS})
  target_link_libraries(${name} PRIVATE ${T_LIBS} GTest::gtest_main)
  # Test code is compiled at -O1: it measures nothing, and a gtest file compiles in 0.7 of the time
  # of -O2 (results/model_test.cpp: 11.8 s against 16.7). Not -O0 (7.6 s): the linker keeps one
  # copy of each inline function and template (std::string, nlohmann-json), the test's own, so the
  # library code under test ran those unoptimised too: reading 50,000 records took 12.4 s at -O0
  # and 2.8 s at -O1 (docs/benchmarks.md "Build and test time").
  target_compile_options(${name} PRIVATE -O1)
  allocmark_precompile(${name} <gtest/gtest.h> ${T_PRECOMPILE})
  allocmark_unity(${name})
  gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60
                       PROPERTIES ENVIRONMENT "ALLOCMARK_SOURCE_DIR=${CMAKE_SOURCE_DIR}" ${ALLOCMARK_USES_A_CPU})
endfunction()
