include(GoogleTest)
# One line per test: allocmark_test(foo_test foo_test.cpp LIBS lib...)
function(allocmark_test name)
  cmake_parse_arguments(T "" "" "SOURCES;LIBS" ${ARGN})
  add_executable(${name} ${T_SOURCES} ${T_UNPARSED_ARGUMENTS})
  target_link_libraries(${name} PRIVATE ${T_LIBS} GTest::gtest_main)
  gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60
                       PROPERTIES ENVIRONMENT "ALLOCMARK_SOURCE_DIR=${CMAKE_SOURCE_DIR}")
endfunction()
