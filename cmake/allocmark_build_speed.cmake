# What keeps a clean build short on a 2-core machine (docs/benchmarks.md "Build time").

# Debug information is most of the compile and link time of a -O2 build, and GCC generates the
# same code with or without it: the measured code does not change. Turn it on to profile allocmark
# itself (perf, gdb); ci/setup.sh leaves it off unless ALLOCMARK_DEBUG_INFO=ON is in its environment.
option(ALLOCMARK_DEBUG_INFO "Compile with -g (the generated code is the same without it)" ON)
if(NOT ALLOCMARK_DEBUG_INFO)
  foreach(lang C CXX)
    foreach(config RELWITHDEBINFO DEBUG)
      string(REGEX REPLACE "(^| )-g[0-9]*" "" CMAKE_${lang}_FLAGS_${config} "${CMAKE_${lang}_FLAGS_${config}}")
    endforeach()
  endforeach()
endif()

# The third-party headers that cost seconds per translation unit (CLI11 ~6 s, nlohmann-json ~3.5 s,
# gtest ~1.5 s, fmt ~1 s at -O2) are parsed once per target instead of once per file.
option(ALLOCMARK_PRECOMPILED_HEADERS "Precompile the heavy third-party headers once per target" ON)
# A precompiled header saves the parsing only: every file still compiles, at -O2, the inline
# functions and template instantiations it uses from those headers (CLI11 is header-only, and each
# cli/ file instantiates most of it). A unity build (`allocmark_unity`) compiles a target's files
# in batches of 8 as one translation unit, so that code is compiled once per batch: the 17 cli/
# files took 163 CPU s as separate files and 29 s as one (docs/benchmarks.md "Build and test
# time"). Only the driver's libraries and the test binaries use it, never measured code: the
# worker, workloads, allocator backends and numap are compiled file by file, so what the compiler
# inlines into a measured loop does not depend on the batching.
option(ALLOCMARK_UNITY_BUILD "Compile the driver's and the tests' files in batches (unity build)" ON)
function(allocmark_precompile target)
  if(ALLOCMARK_PRECOMPILED_HEADERS)
    target_precompile_headers(${target} PRIVATE ${ARGN})
  endif()
endfunction()
function(allocmark_unity target)
  if(ALLOCMARK_UNITY_BUILD)
    set_target_properties(${target} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE 8)
  endif()
endfunction()
