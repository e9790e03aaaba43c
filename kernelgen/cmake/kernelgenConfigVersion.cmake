# find_package(kernelgen <version>) asks this file whether the kernelgen beside it will do.
#
# The version is read from kernelgen/version.py, the one place it is written, so a wheel, an editable install and
# a checkout can never disagree with the Python package they ship in.
#
# Compatibility follows semantic versioning, including its rule for 0.x: before 1.0 a minor release may change
# the config format or the generated API, so a request for 0.1 accepts 0.1.z (z >= the requested patch) and not
# 0.2; from 1.0 on, a request accepts any later version with the same major (CMake's SameMajorVersion).
# A version range (find_package(kernelgen 0.1...0.3)) accepts what lies in the range.
#
# kernelgen runs on the build machine and writes portable sources, so the target's pointer size (an NDK or
# Hexagon toolchain's) does not matter: there is no CMAKE_SIZEOF_VOID_P check, as for an ARCH_INDEPENDENT package.

file(STRINGS "${CMAKE_CURRENT_LIST_DIR}/../version.py" _kernelgen_version_line
     REGEX "^__version__ = \"[0-9]+\\.[0-9]+\\.[0-9]+[^\"]*\"$" LIMIT_COUNT 1)
if(NOT _kernelgen_version_line MATCHES "\"([0-9]+)\\.([0-9]+)\\.([0-9]+)([^\"]*)\"")
  set(PACKAGE_VERSION "0")
  set(PACKAGE_VERSION_UNSUITABLE TRUE)
  return()
endif()
set(PACKAGE_VERSION "${CMAKE_MATCH_1}.${CMAKE_MATCH_2}.${CMAKE_MATCH_3}")
set(_kernelgen_major "${CMAKE_MATCH_1}")
set(_kernelgen_minor "${CMAKE_MATCH_2}")
unset(_kernelgen_version_line)

set(PACKAGE_VERSION_COMPATIBLE FALSE)
set(PACKAGE_VERSION_EXACT FALSE)
if(PACKAGE_FIND_VERSION_RANGE)
  # Both ends as the caller wrote them: min...max includes max, min...<max does not (min is always included).
  set(_kernelgen_max_ok FALSE)
  if(PACKAGE_VERSION VERSION_LESS PACKAGE_FIND_VERSION_MAX)
    set(_kernelgen_max_ok TRUE)
  elseif(PACKAGE_FIND_VERSION_RANGE_MAX STREQUAL "INCLUDE" AND PACKAGE_VERSION VERSION_EQUAL PACKAGE_FIND_VERSION_MAX)
    set(_kernelgen_max_ok TRUE)
  endif()
  if(_kernelgen_max_ok AND PACKAGE_VERSION VERSION_GREATER_EQUAL PACKAGE_FIND_VERSION_MIN)
    set(PACKAGE_VERSION_COMPATIBLE TRUE)
  endif()
  unset(_kernelgen_max_ok)
elseif(NOT DEFINED PACKAGE_FIND_VERSION OR PACKAGE_FIND_VERSION STREQUAL "")
  set(PACKAGE_VERSION_COMPATIBLE TRUE)  # find_package(kernelgen) without a version takes any
elseif(PACKAGE_VERSION VERSION_GREATER_EQUAL PACKAGE_FIND_VERSION)
  if(_kernelgen_major EQUAL 0)
    # 0.x: the minor is the API line (a request for "0" alone means 0.0, as in CMake's SameMinorVersion)
    if(PACKAGE_FIND_VERSION_MAJOR EQUAL 0 AND _kernelgen_minor EQUAL PACKAGE_FIND_VERSION_MINOR)
      set(PACKAGE_VERSION_COMPATIBLE TRUE)
    endif()
  elseif(_kernelgen_major EQUAL PACKAGE_FIND_VERSION_MAJOR)
    set(PACKAGE_VERSION_COMPATIBLE TRUE)
  endif()
  if(PACKAGE_VERSION VERSION_EQUAL PACKAGE_FIND_VERSION)
    set(PACKAGE_VERSION_EXACT TRUE)
  endif()
endif()
unset(_kernelgen_major)
unset(_kernelgen_minor)
