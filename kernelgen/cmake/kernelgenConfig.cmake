# kernelgen's CMake package: find_package(kernelgen 0.1 CONFIG REQUIRED) with
#   cmake -Dkernelgen_DIR="$(kernelgen --cmake-dir)"   (or that folder on CMAKE_PREFIX_PATH)
#
# It ships inside the Python package (kernelgen/cmake/), so it always belongs to one kernelgen install, and it looks
# for that install's `kernelgen` command:
#   KERNELGEN_EXECUTABLE   cache variable: the kernelgen command; found next to the package's site-packages
#                          (<prefix>/bin, <prefix>/Scripts; a checkout's .venv/bin), else on PATH, and checked to
#                          belong to this package
#   kernelgen::kernelgen   an imported executable target for the same command
#   kernelgen_add_kernels  kernelgenAddKernels.cmake: generation at build time, the kernels as library targets
#
# Cross-compiling (an NDK, a Hexagon SDK toolchain file): kernelgen runs on the build machine, so it is searched
# outside CMAKE_FIND_ROOT_PATH; toolchain files that re-root package searches (CMAKE_FIND_ROOT_PATH_MODE_PACKAGE
# ONLY, as the NDK's does) need -Dkernelgen_DIR rather than CMAKE_PREFIX_PATH.

if(CMAKE_VERSION VERSION_LESS 3.20)
  # add_custom_command(DEPFILE) with the Makefile generators, and cmake_path(), arrived in 3.20
  set(kernelgen_FOUND FALSE)
  set(kernelgen_NOT_FOUND_MESSAGE "kernelgen's CMake package needs CMake 3.20 or newer; this is ${CMAKE_VERSION}")
  return()
endif()

cmake_policy(PUSH)
cmake_policy(VERSION 3.20...3.31)  # the functions defined below keep these policies wherever they are called

get_filename_component(_kernelgen_package "${CMAKE_CURRENT_LIST_DIR}/.." REALPATH)

if(NOT KERNELGEN_EXECUTABLE)
  # Where pip puts the console script of the site-packages this package lies in: <prefix>/lib/pythonX.Y/
  # site-packages -> <prefix>/bin (venvs, --user, /usr/local), <prefix>/Lib/site-packages -> <prefix>/Scripts
  # (Windows). Searched before PATH, which may hold another install's kernelgen.
  get_filename_component(_kernelgen_site "${_kernelgen_package}" DIRECTORY)
  get_filename_component(_kernelgen_site_name "${_kernelgen_site}" NAME)
  if(_kernelgen_site_name MATCHES "^(site|dist)-packages$")
    find_program(KERNELGEN_EXECUTABLE NAMES kernelgen
                 HINTS "${_kernelgen_site}/../../../bin" "${_kernelgen_site}/../../Scripts"
                 NO_DEFAULT_PATH NO_CMAKE_FIND_ROOT_PATH)
  else()
    # a checkout (an editable install, or none): `make demo` installs it into the checkout's .venv
    find_program(KERNELGEN_EXECUTABLE NAMES kernelgen HINTS "${_kernelgen_site}/.venv/bin"
                 NO_DEFAULT_PATH NO_CMAKE_FIND_ROOT_PATH)
  endif()
  find_program(KERNELGEN_EXECUTABLE NAMES kernelgen NO_CMAKE_FIND_ROOT_PATH
               DOC "The kernelgen command whose CMake package this is (kernelgen --cmake-dir names it)")
  unset(_kernelgen_site)
  unset(_kernelgen_site_name)
endif()

set(kernelgen_FOUND TRUE)
if(NOT KERNELGEN_EXECUTABLE)
  set(kernelgen_FOUND FALSE)
  string(CONCAT kernelgen_NOT_FOUND_MESSAGE "no kernelgen command found beside ${_kernelgen_package} or on PATH; set "
      "KERNELGEN_EXECUTABLE to the kernelgen of the install whose --cmake-dir is ${CMAKE_CURRENT_LIST_DIR}")
elseif(NOT "${_KERNELGEN_CHECKED}" STREQUAL "${KERNELGEN_EXECUTABLE}|${_kernelgen_package}")
  # Another install's kernelgen (an older venv on PATH) would generate with other templates than this package
  # was shipped with: ask the command which package it belongs to, once per (command, package).
  execute_process(COMMAND "${KERNELGEN_EXECUTABLE}" --cmake-dir RESULT_VARIABLE _kernelgen_status
                  OUTPUT_VARIABLE _kernelgen_dir ERROR_VARIABLE _kernelgen_error OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT _kernelgen_status EQUAL 0)
    set(kernelgen_FOUND FALSE)
    string(CONCAT kernelgen_NOT_FOUND_MESSAGE "${KERNELGEN_EXECUTABLE} --cmake-dir failed (${_kernelgen_status}): "
        "${_kernelgen_error}")
  else()
    file(REAL_PATH "${_kernelgen_dir}" _kernelgen_dir)
    file(REAL_PATH "${CMAKE_CURRENT_LIST_DIR}" _kernelgen_here)
    if(NOT _kernelgen_dir STREQUAL _kernelgen_here)
      set(kernelgen_FOUND FALSE)
      string(CONCAT kernelgen_NOT_FOUND_MESSAGE "KERNELGEN_EXECUTABLE=${KERNELGEN_EXECUTABLE} belongs to the "
          "kernelgen whose CMake package is ${_kernelgen_dir}, not to this one (${_kernelgen_here}): set "
          "KERNELGEN_EXECUTABLE to this install's kernelgen, or kernelgen_DIR to that one's folder")
    else()
      set(_KERNELGEN_CHECKED "${KERNELGEN_EXECUTABLE}|${_kernelgen_package}" CACHE INTERNAL
          "the kernelgen command and package found to belong together")
    endif()
  endif()
  unset(_kernelgen_status)
  unset(_kernelgen_dir)
  unset(_kernelgen_here)
  unset(_kernelgen_error)
endif()

if(kernelgen_FOUND)
  if(NOT TARGET kernelgen::kernelgen)
    add_executable(kernelgen::kernelgen IMPORTED)
    set_target_properties(kernelgen::kernelgen PROPERTIES IMPORTED_LOCATION "${KERNELGEN_EXECUTABLE}")
  endif()
  # What decides the names of the files a build writes besides the configs (kernelgenAddKernels.cmake keys its
  # configure-time listings on it): the command and its version.
  set_property(GLOBAL PROPERTY KERNELGEN_TOOL "${KERNELGEN_EXECUTABLE}|${kernelgen_VERSION}")
  include("${CMAKE_CURRENT_LIST_DIR}/kernelgenAddKernels.cmake")
endif()
unset(_kernelgen_package)
cmake_policy(POP)
