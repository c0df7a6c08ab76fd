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
function(allocmark_precompile target)
  if(ALLOCMARK_PRECOMPILED_HEADERS)
    target_precompile_headers(${target} PRIVATE ${ARGN})
  endif()
endfunction()
