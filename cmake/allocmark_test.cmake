# ci/test.sh runs ctest with one "cpus" slot per core (a resource spec file): every test holds one
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
  # Test code is compiled without optimisation: it measures nothing (the code under test comes
  # optimised from its own libraries), and -O0 compiles a gtest file in about half the time of
  # -O2 (results/model_test.cpp: 7.6 s against 16.7; docs/benchmarks.md "Build and test time").
  target_compile_options(${name} PRIVATE -O0)
  allocmark_precompile(${name} <gtest/gtest.h> ${T_PRECOMPILE})
  allocmark_unity(${name})
  gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60
                       PROPERTIES ENVIRONMENT "ALLOCMARK_SOURCE_DIR=${CMAKE_SOURCE_DIR}" ${ALLOCMARK_USES_A_CPU})
endfunction()
