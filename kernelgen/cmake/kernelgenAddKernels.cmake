# kernelgen_add_kernels(<name> CONFIGS <file>... [TARGETS <target>...] [DEVICE <profile>] [OUTPUT_DIR <dir>]
#                       [EMBED_WEIGHTS])
#
# Generates kernels at build time and makes them targets:
#   <name>            STATIC library of the c target's sources (network.c too, for a manifest), position-independent
#                     (it usually ends up in an app's or a DSP skeleton's shared library); its include folders are a
#                     usage requirement. An INTERFACE library when no config has the c target.
#   <name>_hvx        STATIC library of the hvx target's sources; built by default only when the toolchain targets
#                     Hexagon, else when something links it. Absent when no config has the hvx target.
# Each config's sources are compiled with the flags its target validated and benchmarked them with (`kernelgen build
# --list-flags`: c's `-O3 -march=native -ffp-contract=fast` or the config's c.cflags; hvx's arch, -mhvx and
# 128-byte vectors), under GCC and Clang; flags a program linking them needs (-fopenmp) are the library's usage
# requirements. A cross build drops the flags that name the build machine's CPU (-march=native): the toolchain
# file says which CPU, and -ffp-contract=fast still lets the compiler fuse multiply-adds.
#   <name>_generate   the generation itself (part of `all`, so GPU-only kernels are written too).
# and for a network manifest (network.yaml from `kernelgen import`):
#   <name>_network    STATIC library of the c target's network driver (network.c: <network>_run over the kernels of
#                     <name>, which it links), its folder (network.h) a usage requirement; with EMBED_WEIGHTS the
#                     weights compiled in (<network>_weights.c), else read from <network>.weights at run time.
#   <network>_run     the network's command-line program (<network>_run.c: `<network>_run [--weights FILE]
#                     [--repeat N] INPUT.npy OUTPUT.npy`), with <network>.weights copied beside it.
#   <name>_hvx_network  the hvx target's network driver, linking <name>_hvx; built as <name>_hvx is. (The hvx
#                     program's runtime is QEMU's: on a device <network>_run is called from a FastRPC skel.)
#   <name>_opencl_network  the opencl target's network driver (network.c over the OpenCL ICD loader, the kernels'
#                     .cl sources embedded), linking OpenCL::OpenCL (CMake's FindOpenCL).
#   <network>_opencl_run  its program, written as opencl/<network>_run in the current binary folder with its own
#                     <network>.weights beside it (the opencl packing, not c's), and its program binary cache.
#   <name>_vulkan_network  the vulkan target's network driver (network.c over the Vulkan loader, the kernels' SPIR-V
#                     embedded), linking Vulkan::Vulkan (CMake's FindVulkan).
#   <network>_vulkan_run  its program, written as vulkan/<network>_run with the vulkan <network>.weights beside it, and
#                     its pipeline cache (<network>.vkcache).
# and these properties on <name>:
#   KERNELGEN_GPU_SOURCES  the .cl, .comp and .spv files (.spv when glslangValidator is on the build machine)
#   KERNELGEN_GPU_FILES    every file of the GPU targets: the sources and how to launch them (.launch.json, ...)
#   KERNELGEN_OUTPUTS      every file generated, plan reports included
#   KERNELGEN_OUTPUT_DIR   the folder they are written into: <dir>/<config>/<target>/...
#
# CONFIGS are configs or network manifests (network.yaml from `kernelgen import`), relative to the current source
# folder. TARGETS (kernelgen's --target) overrides the configs' own `targets:`; DEVICE is --device. OUTPUT_DIR
# defaults to ${CMAKE_CURRENT_BINARY_DIR}/kernelgen/<name>.
#
# How the build stays exact and quiet: each config is one custom command run at build time, whose output is a
# stamp and whose byproducts are the generated files; kernelgen's depfile names the stamp and everything the
# files depend on (the config, the templates, kernelgen's modules), so touching any of them regenerates, and
# kernelgen rewrites only files whose text changed, so an unchanged generation recompiles nothing (Ninja restats
# byproducts, make compares their unchanged times). add_library needs the file names at configure time: they come
# from `kernelgen build --list-outputs`, and the configs it reads (--list-inputs) are configure dependencies. The
# listing is kept in the cache under a key of those files' contents and the kernelgen command, so a reconfigure
# runs kernelgen only for configs whose text changed.

function(kernelgen_add_kernels name)
  cmake_parse_arguments(PARSE_ARGV 1 arg "EMBED_WEIGHTS" "DEVICE;OUTPUT_DIR" "CONFIGS;TARGETS")
  set(where "kernelgen_add_kernels(${name})")
  if(arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "${where}: unknown arguments: ${arg_UNPARSED_ARGUMENTS} (it takes CONFIGS, TARGETS, DEVICE, "
                        "OUTPUT_DIR, EMBED_WEIGHTS)")
  endif()
  if(NOT arg_CONFIGS)
    message(FATAL_ERROR "${where}: CONFIGS names no file; give one or more configs or network manifests")
  endif()
  foreach(target IN ITEMS ${name} ${name}_hvx ${name}_generate ${name}_network ${name}_hvx_network
                          ${name}_opencl_network ${name}_vulkan_network)
    if(TARGET ${target})
      message(FATAL_ERROR "${where}: a target named ${target} exists already")
    endif()
  endforeach()
  if(arg_OUTPUT_DIR)
    cmake_path(ABSOLUTE_PATH arg_OUTPUT_DIR BASE_DIRECTORY "${CMAKE_CURRENT_BINARY_DIR}" NORMALIZE OUTPUT_VARIABLE out)
  else()
    set(out "${CMAKE_CURRENT_BINARY_DIR}/kernelgen/${name}")
  endif()
  set(options "")
  foreach(target IN LISTS arg_TARGETS)
    list(APPEND options --target "${target}")
  endforeach()
  if(arg_DEVICE)
    list(APPEND options --device "${arg_DEVICE}")
  endif()

  set(state "${CMAKE_CURRENT_BINARY_DIR}/CMakeFiles/${name}.kernelgen")  # stamps and depfiles, one per config
  set(stamps "")
  set(outputs "")
  set(flag_lines "")
  set(index 0)
  foreach(config IN LISTS arg_CONFIGS)
    if(config MATCHES "^[A-Z_]+$" AND NOT EXISTS "${CMAKE_CURRENT_SOURCE_DIR}/${config}")
      message(FATAL_ERROR "${where}: CONFIGS names ${config}, which is no file: a misspelt keyword? (it takes "
                          "CONFIGS, TARGETS, DEVICE, OUTPUT_DIR, EMBED_WEIGHTS)")
    endif()
    cmake_path(ABSOLUTE_PATH config BASE_DIRECTORY "${CMAKE_CURRENT_SOURCE_DIR}" NORMALIZE)
    set(config_options ${options})
    if(arg_EMBED_WEIGHTS AND EXISTS "${config}")
      file(STRINGS "${config}" manifest_key REGEX "^network:" LIMIT_INPUT 65536)  # kernelgen's own test
      if(manifest_key)
        list(APPEND config_options --embed-weights)
      endif()
    endif()
    _kernelgen_listing("${where}" "${config}" "${out}" "${config_options}" made inputs config_flags)
    list(APPEND flag_lines ${config_flags})
    get_property(claimed GLOBAL PROPERTY _KERNELGEN_OUTPUTS)  # every call's, so two never write one file
    foreach(file IN LISTS made)
      if(file IN_LIST outputs OR file IN_LIST claimed)
        message(FATAL_ERROR "${where}: ${config} would write ${file}, which another config writes too: config "
                            "names must be unique within an OUTPUT_DIR (give each kernelgen_add_kernels() its own)")
      endif()
    endforeach()
    list(APPEND outputs ${made})
    set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${inputs})
    math(EXPR index "${index} + 1")
    cmake_path(GET config STEM stem)
    set(stamp "${state}/${index}_${stem}.stamp")
    cmake_path(RELATIVE_PATH config BASE_DIRECTORY "${CMAKE_SOURCE_DIR}" OUTPUT_VARIABLE shown)
    add_custom_command(
      OUTPUT "${stamp}"
      BYPRODUCTS ${made}
      COMMAND "${KERNELGEN_EXECUTABLE}" build "${config}" -o "${out}" ${config_options} --quiet
              --depfile "${stamp}.d" --depfile-target "${stamp}"
      COMMAND "${CMAKE_COMMAND}" -E touch "${stamp}"
      DEPENDS ${inputs}  # the depfile names them too, but there is none before the first build
      DEPFILE "${stamp}.d"
      COMMENT "kernelgen: generating ${name} from ${shown}"
      VERBATIM)
    list(APPEND stamps "${stamp}")
  endforeach()
  add_custom_target(${name}_generate ALL DEPENDS ${stamps})
  set_property(GLOBAL APPEND PROPERTY _KERNELGEN_OUTPUTS ${outputs})

  # sets c_sources, c_includes, c_network_sources, c_network_includes, c_programs, c_weights (and hvx_*), gpu_*
  _kernelgen_sort_outputs("${out}" "${outputs}")
  if(c_sources OR hvx_sources)
    get_property(languages GLOBAL PROPERTY ENABLED_LANGUAGES)
    if(NOT "C" IN_LIST languages)
      message(FATAL_ERROR "${where}: the generated kernels are C; enable the language (project(... C) or "
                          "enable_language(C))")
    endif()
  endif()
  if(c_sources)
    add_library(${name} STATIC ${c_sources})
    set_target_properties(${name} PROPERTIES POSITION_INDEPENDENT_CODE ON)
    target_compile_features(${name} PRIVATE c_std_99)  # restrict, declarations in for loops
    # BUILD_INTERFACE: an install(EXPORT) of a target linking these kernels installs the headers where it wants
    target_include_directories(${name} PUBLIC "$<BUILD_INTERFACE:${c_includes}>")
  else()
    add_library(${name} INTERFACE)
  endif()
  add_dependencies(${name} ${name}_generate)
  set_target_properties(${name} PROPERTIES
    KERNELGEN_GPU_SOURCES "${gpu_sources}"
    KERNELGEN_GPU_FILES "${gpu_files}"
    KERNELGEN_OUTPUTS "${outputs}"
    KERNELGEN_OUTPUT_DIR "${out}")

  if(hvx_sources)
    add_library(${name}_hvx STATIC ${hvx_sources})
    set_target_properties(${name}_hvx PROPERTIES POSITION_INDEPENDENT_CODE ON)
    target_compile_features(${name}_hvx PRIVATE c_std_99)
    target_include_directories(${name}_hvx PUBLIC "$<BUILD_INTERFACE:${hvx_includes}>")
    add_dependencies(${name}_hvx ${name}_generate)
    if(NOT (CMAKE_SYSTEM_PROCESSOR MATCHES "^[Hh]exagon" OR CMAKE_C_COMPILER_TARGET MATCHES "^hexagon"))
      # a host build of configs that also target hvx: the HVX intrinsics need a Hexagon compiler
      set_target_properties(${name}_hvx PROPERTIES EXCLUDE_FROM_ALL TRUE)
    endif()
  endif()
  _kernelgen_add_networks(${name} "${where}")
  _kernelgen_apply_flags(${name} "${out}" "${flag_lines}"
                         "${c_sources};${hvx_sources};${c_network_sources};${hvx_network_sources};${c_programs}")
endfunction()


# The network drivers' libraries and the c programs, from the lists _kernelgen_sort_outputs set in the caller.
macro(_kernelgen_add_networks name where)
  foreach(kind IN ITEMS c hvx)
    set(kernels ${name})
    if(kind STREQUAL "hvx")
      set(kernels ${name}_hvx)
    endif()
    if(${kind}_network_sources)
      add_library(${kernels}_network STATIC ${${kind}_network_sources})
      set_target_properties(${kernels}_network PROPERTIES POSITION_INDEPENDENT_CODE ON)
      target_compile_features(${kernels}_network PRIVATE c_std_99)
      target_include_directories(${kernels}_network PUBLIC "$<BUILD_INTERFACE:${${kind}_network_includes}>")
      target_link_libraries(${kernels}_network PUBLIC ${kernels})
      add_dependencies(${kernels}_network ${name}_generate)
      get_target_property(excluded ${kernels} EXCLUDE_FROM_ALL)
      if(excluded)
        set_target_properties(${kernels}_network PROPERTIES EXCLUDE_FROM_ALL TRUE)
      endif()
    endif()
  endforeach()
  find_library(KERNELGEN_LIBM m)  # the kernels call fmaxf and friends; none on platforms where libc has them
  mark_as_advanced(KERNELGEN_LIBM)
  foreach(program IN LISTS c_programs)
    cmake_path(GET program STEM program_name)  # <network>_run
    cmake_path(GET program PARENT_PATH folder)
    if(TARGET ${program_name})
      message(FATAL_ERROR "${where}: a target named ${program_name} exists already (the network's program)")
    endif()
    add_executable(${program_name} "${program}")
    target_compile_features(${program_name} PRIVATE c_std_99)
    target_link_libraries(${program_name} PRIVATE ${name}_network)
    if(KERNELGEN_LIBM)
      target_link_libraries(${program_name} PRIVATE "${KERNELGEN_LIBM}")
    endif()
    string(REGEX REPLACE "_run$" "" network "${program_name}")
    if("${folder}/${network}_weights.c" IN_LIST c_network_sources)
      string(TOUPPER "${network}" upper)
      target_compile_definitions(${program_name} PRIVATE ${upper}_EMBEDDED_WEIGHTS)
    endif()
    # the program reads <network>.weights beside itself unless told otherwise
    add_custom_command(TARGET ${program_name} POST_BUILD
      COMMAND "${CMAKE_COMMAND}" -E copy_if_different "${folder}/${network}.weights" "$<TARGET_FILE_DIR:${program_name}>"
      VERBATIM)
  endforeach()
  foreach(gpu IN ITEMS opencl vulkan)
    _kernelgen_add_gpu_network(${name} "${where}" ${gpu} "${${gpu}_network_sources}" "${${gpu}_network_includes}"
                               "${${gpu}_programs}")
  endforeach()
endmacro()


# The flags of `kernelgen build --list-flags` (FOLDER, compile or link, FLAG; tab-separated) on the sources in that
# folder (COMPILE_OPTIONS of each .c file) and, for link flags, on the library holding them as a usage requirement.
function(_kernelgen_apply_flags name out flag_lines sources)
  set(compiler "$<C_COMPILER_ID:GNU,Clang,AppleClang>")  # the flags are GCC's and Clang's spelling
  foreach(line IN LISTS flag_lines)
    string(REPLACE "\t" ";" fields "${line}")
    list(GET fields 0 folder)
    list(GET fields 1 kind)
    list(GET fields 2 flag)
    if(CMAKE_CROSSCOMPILING AND flag MATCHES "^-m(arch|cpu|tune)=native$")
      continue()
    endif()
    set(flags "${flag}")
    if(flag STREQUAL "-march=native")
      _kernelgen_native_quirks(quirks)
      list(APPEND flags ${quirks})
    endif()
    cmake_path(GET folder FILENAME target)
    set(library ${name})
    if(target STREQUAL "hvx")
      set(library ${name}_hvx)
    endif()
    if(NOT TARGET ${library})
      continue()
    endif()
    if(kind STREQUAL "link")
      target_link_options(${library} INTERFACE "$<${compiler}:${flag}>")
      continue()
    endif()
    foreach(file IN LISTS sources)
      cmake_path(GET file PARENT_PATH parent)
      cmake_path(GET file EXTENSION LAST_ONLY extension)
      if(parent STREQUAL folder AND extension STREQUAL ".c")
        foreach(one IN LISTS flags)
          set_property(SOURCE "${file}" APPEND PROPERTY COMPILE_OPTIONS "$<${compiler}:${one}>")
        endforeach()
      endif()
    endforeach()
  endforeach()
endfunction()


# What the C compiler needs beside -march=native to build quietly on this machine, asked once per compiler: clang 19
# on a core with AVX10.1 reads -march=native as +avx10.1-256 and warns on every file that it promotes that to 512
# bits (-Winvalid-feature-combination), which a -Werror build turns into errors. kernelgen's own c builds add the
# same flag on such a machine (targets/c/toolchain.py, native_quirks); other compilers and machines get nothing.
function(_kernelgen_native_quirks result_var)
  string(MD5 slot "${CMAKE_C_COMPILER}|${CMAKE_C_COMPILER_VERSION}")
  set(slot "_KERNELGEN_NATIVE_QUIRKS_${slot}")
  if(NOT DEFINED CACHE{${slot}})
    set(probe "${CMAKE_CURRENT_BINARY_DIR}/CMakeFiles/kernelgen_native_quirks")
    file(WRITE "${probe}/native.c" "int kernelgen_native;\n")
    execute_process(COMMAND "${CMAKE_C_COMPILER}" -march=native -Werror -fsyntax-only "${probe}/native.c"
                    RESULT_VARIABLE status OUTPUT_QUIET ERROR_VARIABLE error)  # no object: the build's own are counted
    set(quirks "")
    if(error MATCHES "-Winvalid-feature-combination")
      set(quirks "-Wno-invalid-feature-combination")
    endif()
    set(${slot} "${quirks}" CACHE INTERNAL "")
  endif()
  set(${result_var} "$CACHE{${slot}}" PARENT_SCOPE)
endfunction()


# The files kernelgen would write for one config (made_var) and the files deciding their names (inputs_var), from
# the cache when none of those files, nor the kernelgen command, nor PATH (glslangValidator decides the .spv) changed.
function(_kernelgen_listing where config out options made_var inputs_var flags_var)
  string(MD5 slot "${config}|${out}|${options}|flags")  # |flags: listings before --list-flags are stale
  set(slot "_KERNELGEN_LISTING_${slot}")
  get_property(tool GLOBAL PROPERTY KERNELGEN_TOOL)
  set(tool "${tool}|$ENV{PATH}")
  if(DEFINED CACHE{${slot}_KEY})
    _kernelgen_key("${tool}" "$CACHE{${slot}_INPUTS}" key)
    if(key STREQUAL "$CACHE{${slot}_KEY}")
      set(${made_var} "$CACHE{${slot}_OUTPUTS}" PARENT_SCOPE)
      set(${inputs_var} "$CACHE{${slot}_INPUTS}" PARENT_SCOPE)
      set(${flags_var} "$CACHE{${slot}_FLAGS}" PARENT_SCOPE)
      return()
    endif()
  endif()
  set(command "${KERNELGEN_EXECUTABLE}" build "${config}" -o "${out}" ${options})
  # in the folder the build's command runs in, so both read the same files
  execute_process(COMMAND ${command} --list-inputs WORKING_DIRECTORY "${CMAKE_CURRENT_BINARY_DIR}"
                  RESULT_VARIABLE status OUTPUT_VARIABLE inputs ERROR_VARIABLE error)
  if(status EQUAL 0)
    execute_process(COMMAND ${command} --list-outputs WORKING_DIRECTORY "${CMAKE_CURRENT_BINARY_DIR}"
                    RESULT_VARIABLE status OUTPUT_VARIABLE made ERROR_VARIABLE error)
  endif()
  if(status EQUAL 0)
    execute_process(COMMAND ${command} --list-flags WORKING_DIRECTORY "${CMAKE_CURRENT_BINARY_DIR}"
                    RESULT_VARIABLE status OUTPUT_VARIABLE flags ERROR_VARIABLE error)
  endif()
  if(NOT status EQUAL 0)
    string(STRIP "${error}" error)
    if(NOT DEFINED CACHE{${slot}_OUTPUTS})
      message(FATAL_ERROR "${where}: kernelgen cannot list the files of ${config}:\n${error}")
    endif()
    # An edit broke a config that built before: keep its last list (its key stays stale, so the next configure
    # asks again) and let the build fail on it, where the edit-build loop shows kernelgen's file:line:col: error.
    message(NOTICE "${where}: ${config} does not load; the build will say why")
    set(${made_var} "$CACHE{${slot}_OUTPUTS}" PARENT_SCOPE)
    set(${inputs_var} "$CACHE{${slot}_INPUTS}" PARENT_SCOPE)
    set(${flags_var} "$CACHE{${slot}_FLAGS}" PARENT_SCOPE)
    return()
  endif()
  string(REGEX REPLACE "\n$" "" inputs "${inputs}")
  string(REGEX REPLACE "\n$" "" made "${made}")
  string(REPLACE "\n" ";" inputs "${inputs}")
  string(REPLACE "\n" ";" made "${made}")
  string(REGEX REPLACE "\n$" "" flags "${flags}")
  string(REPLACE "\n" ";" flags "${flags}")
  set(resolved "")
  foreach(file IN LISTS inputs)  # kernelgen prints them as it was given them, relative to its working folder
    cmake_path(ABSOLUTE_PATH file BASE_DIRECTORY "${CMAKE_CURRENT_BINARY_DIR}" NORMALIZE)
    list(APPEND resolved "${file}")
  endforeach()
  _kernelgen_key("${tool}" "${resolved}" key)
  set(${slot}_KEY "${key}" CACHE INTERNAL "")
  set(${slot}_INPUTS "${resolved}" CACHE INTERNAL "")
  set(${slot}_OUTPUTS "${made}" CACHE INTERNAL "")
  set(${slot}_FLAGS "${flags}" CACHE INTERNAL "")
  set(${made_var} "${made}" PARENT_SCOPE)
  set(${flags_var} "${flags}" PARENT_SCOPE)
  set(${inputs_var} "${resolved}" PARENT_SCOPE)
endfunction()


function(_kernelgen_key tool files result_var)
  set(key "${tool}")
  foreach(file IN LISTS files)
    set(hash "missing")
    if(EXISTS "${file}")
      file(SHA256 "${file}" hash)
    endif()
    string(APPEND key "|${file}=${hash}")
  endforeach()
  string(SHA256 key "${key}")
  set(${result_var} "${key}" PARENT_SCOPE)
endfunction()


# Which target's files each output is, by its place: <out>/<config>/<target>/<file> (plan reports sit one level up).
# A network's folder, <out>/<network>/<target>/, is the one holding <network>.weights: its driver (network.c,
# <network>_weights.c) and headers go to <target>_network_*, its program (<network>_run.c) to <target>_programs, the
# weights file to <target>_weights; the Makefile and hvx's simulator runtime are for the build without CMake.
# Sets c_sources, c_includes, c_network_sources, c_network_includes, c_programs, c_weights, the same for hvx, opencl
# and vulkan (whose kernels' own files are gpu_*), gpu_sources and gpu_files in the caller.
function(_kernelgen_sort_outputs out outputs)
  set(kinds gpu_sources gpu_files)
  foreach(target IN ITEMS c hvx opencl vulkan)
    list(APPEND kinds ${target}_sources ${target}_includes ${target}_network_sources ${target}_network_includes
         ${target}_programs ${target}_weights)
  endforeach()
  foreach(kind IN LISTS kinds)
    set(${kind} "")
  endforeach()
  set(network_folders "")
  foreach(file IN LISTS outputs)
    cmake_path(RELATIVE_PATH file BASE_DIRECTORY "${out}" OUTPUT_VARIABLE relative)
    string(REPLACE "/" ";" parts "${relative}")
    list(GET parts 0 top)
    cmake_path(GET file FILENAME file_name)
    if(file_name STREQUAL "${top}.weights")
      cmake_path(GET file PARENT_PATH folder)
      list(APPEND network_folders "${folder}")
    endif()
  endforeach()
  foreach(file IN LISTS outputs)
    cmake_path(RELATIVE_PATH file BASE_DIRECTORY "${out}" OUTPUT_VARIABLE relative)
    string(REPLACE "/" ";" parts "${relative}")
    list(LENGTH parts depth)
    if(NOT depth EQUAL 3)
      continue()
    endif()
    list(GET parts 0 top)
    list(GET parts 1 target)
    cmake_path(GET file PARENT_PATH folder)
    cmake_path(GET file FILENAME file_name)
    cmake_path(GET file EXTENSION LAST_ONLY extension)
    if(target MATCHES "^(c|hvx|opencl|vulkan)$" AND folder IN_LIST network_folders)
      if(file_name STREQUAL "${top}_run.c")
        list(APPEND ${target}_programs "${file}")
      elseif(extension STREQUAL ".weights")
        list(APPEND ${target}_weights "${file}")
      elseif(file_name MATCHES "^network\\.[ch]$" OR file_name STREQUAL "${top}_weights.c")
        list(APPEND ${target}_network_sources "${file}")
        list(APPEND ${target}_network_includes "${folder}")  # also the program's headers (kg_npy.h, kg_weights.h)
      endif()  # the rest is the program's: the Makefile, hvx's simulator runtime (kg_runtime.c, its small libc)
    elseif(target STREQUAL "c" OR target STREQUAL "hvx")
      list(APPEND ${target}_sources "${file}")  # headers too: IDEs show them, and nothing compiles them
      if(extension STREQUAL ".h")
        list(APPEND ${target}_includes "${folder}")
      endif()
    else()
      list(APPEND gpu_files "${file}")
      if(extension MATCHES "^\\.(cl|comp|spv)$")
        list(APPEND gpu_sources "${file}")
      endif()
    endif()
  endforeach()
  foreach(kind IN LISTS kinds)
    list(REMOVE_DUPLICATES ${kind})
    set(${kind} "${${kind}}" PARENT_SCOPE)
  endforeach()
endfunction()


# A GPU target's network driver and programs: C host code over the API's loader, the kernels embedded in network.c
# (opencl's .cl sources, vulkan's SPIR-V words), so no kernel C sources. The two differ only in the loader's
# imported target and where to get it.
function(_kernelgen_add_gpu_network name where gpu sources includes programs)
  if(NOT sources)
    return()
  endif()
  if(gpu STREQUAL "opencl")
    find_package(OpenCL)
    set(loader OpenCL::OpenCL)
    set(needs "the OpenCL headers and ICD loader (Debian: ocl-icd-opencl-dev)")
  else()
    # CMake's FindVulkan, not the loader by name: the module is in every CMake this package accepts (since 3.7), and
    # its Vulkan::Vulkan carries the headers' folder too (a Vulkan SDK outside /usr, an NDK's sysroot)
    find_package(Vulkan)
    set(loader Vulkan::Vulkan)
    set(needs "the Vulkan headers and loader (Debian: libvulkan-dev)")
  endif()
  if(NOT TARGET ${loader})
    message(FATAL_ERROR "${where}: the ${gpu} network driver needs ${needs}, which find_package() did not find")
  endif()
  set(driver ${name}_${gpu}_network)
  add_library(${driver} STATIC ${sources})
  set_target_properties(${driver} PROPERTIES POSITION_INDEPENDENT_CODE ON)
  target_compile_features(${driver} PRIVATE c_std_99)
  target_include_directories(${driver} PUBLIC "$<BUILD_INTERFACE:${includes}>")
  target_link_libraries(${driver} PUBLIC ${loader})
  add_dependencies(${driver} ${name}_generate)
  foreach(program IN LISTS programs)
    cmake_path(GET program STEM program_name)  # <network>_run
    cmake_path(GET program PARENT_PATH folder)
    string(REGEX REPLACE "_run$" "" network "${program_name}")
    set(target ${network}_${gpu}_run)
    if(TARGET ${target})
      message(FATAL_ERROR "${where}: a target named ${target} exists already (the network's program)")
    endif()
    add_executable(${target} "${program}")
    target_compile_features(${target} PRIVATE c_std_99)
    target_link_libraries(${target} PRIVATE ${driver})
    # a folder of its own: the program and its weights file have the names the c program's and the other GPU's have
    set_target_properties(${target} PROPERTIES OUTPUT_NAME ${program_name}
                          RUNTIME_OUTPUT_DIRECTORY "${CMAKE_CURRENT_BINARY_DIR}/${gpu}")
    if("${folder}/${network}_weights.c" IN_LIST sources)
      string(TOUPPER "${network}" upper)
      target_compile_definitions(${target} PRIVATE ${upper}_EMBEDDED_WEIGHTS)
    endif()
    add_custom_command(TARGET ${target} POST_BUILD
      COMMAND "${CMAKE_COMMAND}" -E copy_if_different "${folder}/${network}.weights" "$<TARGET_FILE_DIR:${target}>"
      VERBATIM)
  endforeach()
endfunction()
