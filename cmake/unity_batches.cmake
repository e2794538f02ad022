# Unity (jumbo) builds, when CMHA_UNITY_BUILD is on (CMakeLists.txt): a
# target's C++ sources are compiled in batches, each batch one translation
# unit that #includes its files in source order, so the headers they share
# (the tensor API, GoogleTest, CLI11) are parsed and their inline code
# compiled once per batch instead of once per file.
#
# Everything a file declares at file scope, in its anonymous namespace or
# with a `using`, is seen by the files after it in its batch: file-local
# helpers have names that say what they are (not `has`, `Case`, `kSizes`, nor
# a POSIX name such as `close` or `write`, which would hide ::close from the
# next file), and a helper two tests need alike lives in tests/support/. A
# file that cannot share a translation unit sets SKIP_UNITY_BUILD_INCLUSION
# with its reason; CMake also leaves out every file with its own
# COMPILE_DEFINITIONS or COMPILE_OPTIONS.

# cmha_unity_batches(TARGET BATCH_SIZE PREFIX): TARGET's .cpp sources, in the
# order it lists them (by folder: neighbours share most headers), go into
# groups of BATCH_SIZE named PREFIX_0, PREFIX_1, ...; a source already in a
# UNITY_GROUP (the cudnn-frontend files of framework/CMakeLists.txt) keeps
# it. CUDA sources are left alone. Call it after the sources' own properties
# are set. UNITY_GROUP is a property of the source
# file in its directory, so two targets of one directory that share a file
# (support/check.cpp) share its group name: give them different prefixes.
# Does nothing unless CMHA_UNITY_BUILD is on.
function(cmha_unity_batches target batch_size prefix)
  if(NOT CMHA_UNITY_BUILD)
    return()
  endif()
  get_target_property(sources ${target} SOURCES)
  set(index 0)
  foreach(source IN LISTS sources)
    if(NOT source MATCHES "\\.cpp$")
      continue()
    endif()
    get_source_file_property(group ${source} UNITY_GROUP)
    get_source_file_property(skip ${source} SKIP_UNITY_BUILD_INCLUSION)
    get_source_file_property(definitions ${source} COMPILE_DEFINITIONS)
    get_source_file_property(options ${source} COMPILE_OPTIONS)
    if(group OR skip OR definitions OR options)  # CMake compiles the last two on their own
      continue()
    endif()
    math(EXPR batch "${index} / ${batch_size}")
    set_source_files_properties(${source} PROPERTIES UNITY_GROUP ${prefix}_${batch})
    math(EXPR index "${index} + 1")
  endforeach()
  set_target_properties(${target} PROPERTIES UNITY_BUILD ON UNITY_BUILD_MODE GROUP)
endfunction()
