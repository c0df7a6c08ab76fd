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
# A precompiled header pays only where several translation units of a target read it: building it
# costs more than parsing it (gtest with nlohmann-json: 5.5-11 CPU s), and each unit then loads it
# instead of parsing. A target compiled as one unit (a unity batch of up to 8 files: most test
# binaries, gate, report) parses the headers once either way, so it gets none: results_test,
# harness_test and topology_test took 28.6, 25.1 and 12.0 CPU s with theirs, 22.9, 19.7 and 8.1
# without (docs/benchmarks.md "Build and test time"). Decided at the end of the target's
# directory, when its sources and unity batching are all known.
function(allocmark_precompile target)
  if(ALLOCMARK_PRECOMPILED_HEADERS)
    set_property(TARGET ${target} APPEND PROPERTY ALLOCMARK_PRECOMPILE ${ARGN})
    # A deferred call's arguments are expanded when it runs: EVAL puts the target's name in now.
    cmake_language(EVAL CODE "cmake_language(DEFER CALL allocmark_precompile_if_shared [[${target}]])")
  endif()
endfunction()
function(allocmark_precompile_if_shared target)
  get_target_property(headers ${target} ALLOCMARK_PRECOMPILE)
  if(NOT headers)
    return()  # applied already (precompile named the target twice)
  endif()
  set_property(TARGET ${target} PROPERTY ALLOCMARK_PRECOMPILE "")
  # A file with its own definitions or options is compiled alone, outside the unity batches.
  get_target_property(sources ${target} SOURCES)
  list(FILTER sources INCLUDE REGEX "\\.(c|cc|cpp|cxx)$")
  set(batched 0)
  set(units 0)
  get_target_property(unity ${target} UNITY_BUILD)
  foreach(source ${sources})
    get_source_file_property(definitions ${source} COMPILE_DEFINITIONS)
    get_source_file_property(options ${source} COMPILE_OPTIONS)
    if(unity AND NOT definitions AND NOT options)
      math(EXPR batched "${batched} + 1")
    else()
      math(EXPR units "${units} + 1")
    endif()
  endforeach()
  if(batched GREATER 0)
    get_target_property(batch ${target} UNITY_BUILD_BATCH_SIZE)
    math(EXPR units "${units} + (${batched} + ${batch} - 1) / ${batch}")
  endif()
  if(units GREATER 1)
    target_precompile_headers(${target} PRIVATE ${headers})
  endif()
endfunction()
function(allocmark_unity target)
  if(ALLOCMARK_UNITY_BUILD)
    set_target_properties(${target} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE 8)
  endif()
endfunction()
