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
# batches of BATCH_SIZE, PREFIX_0.cpp, PREFIX_1.cpp, ... in unity/ of the
# current build folder; a source already in a UNITY_GROUP (the cudnn-frontend
# files of framework/CMakeLists.txt) goes into a batch of that name. CUDA
# sources are left alone. Call it after the sources' own properties are set.
#
# The batch files are written here, not by CMake's UNITY_BUILD, because
# CMake's #include each source by its absolute path: a clone elsewhere (CI's)
# then misses every unity object in ccache. Ours include "../../framework/x.cpp",
# relative to the batch file, so two clones with the build folder at the same
# place inside them share the cache. The batched sources stay in the target
# (IDEs, the file list) as HEADER_FILE_ONLY; Ninja's depfiles rebuild a batch
# when one of its files changes, and a batch file is rewritten only when its
# list changes. HEADER_FILE_ONLY is a property of the source file in its
# directory, so a file two targets of one directory share (support/check.cpp)
# must be batched by both.
# Does nothing unless CMHA_UNITY_BUILD is on.
function(cmha_unity_batches target batch_size prefix)
  if(NOT CMHA_UNITY_BUILD)
    return()
  endif()
  get_target_property(sources ${target} SOURCES)
  set(unity_dir ${CMAKE_CURRENT_BINARY_DIR}/unity)
  set(index 0)
  set(batches "")
  foreach(source IN LISTS sources)
    if(NOT source MATCHES "\\.cpp$")
      continue()
    endif()
    get_source_file_property(group ${source} UNITY_GROUP)
    get_source_file_property(skip ${source} SKIP_UNITY_BUILD_INCLUSION)
    get_source_file_property(definitions ${source} COMPILE_DEFINITIONS)
    get_source_file_property(options ${source} COMPILE_OPTIONS)
    if(skip OR definitions OR options)  # compiled on their own, with their own settings
      continue()
    endif()
    if(NOT group)
      math(EXPR batch "${index} / ${batch_size}")
      set(group ${prefix}_${batch})
      math(EXPR index "${index} + 1")
    endif()
    get_filename_component(absolute ${source} ABSOLUTE BASE_DIR ${CMAKE_CURRENT_SOURCE_DIR})
    file(RELATIVE_PATH relative ${unity_dir} ${absolute})
    if(NOT group IN_LIST batches)
      list(APPEND batches ${group})
      set(includes_${group} "")
    endif()
    string(APPEND includes_${group} "#include \"${relative}\"\n")
    set_source_files_properties(${source} PROPERTIES HEADER_FILE_ONLY ON)
  endforeach()
  foreach(group IN LISTS batches)
    set(content "/* cmha_unity_batches (cmake/unity_batches.cmake): one translation unit of ${target} */\n${includes_${group}}")
    file(CONFIGURE OUTPUT ${unity_dir}/${group}.cpp CONTENT "${content}" @ONLY)
    target_sources(${target} PRIVATE ${unity_dir}/${group}.cpp)
  endforeach()
  set_target_properties(${target} PROPERTIES UNITY_BUILD OFF)
endfunction()
