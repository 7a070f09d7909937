# The compiler token of the table header: a hash of the compiler identity and
# the flags the kernels are built with, fixed at configure time. Any change of
# compiler or kernel flags changes it, and tables made before refuse to load.
function(strata_hash out text)
  string(SHA256 h "${text}")
  string(SUBSTRING "${h}" 0 16 h)
  set(${out} "${h}" PARENT_SCOPE)
endfunction()

string(TOUPPER "${CMAKE_BUILD_TYPE}" _bt)
strata_hash(STRATA_HOST_COMPILER_HASH
  "${CMAKE_C_COMPILER_ID};${CMAKE_C_COMPILER_VERSION};${STRATA_C_FLAGS};${CMAKE_C_FLAGS};${CMAKE_C_FLAGS_${_bt}}")
string(TOLOWER "${STRATA_GPU_BACKEND}" STRATA_GPU_BACKEND_LOWER)
set(STRATA_GPU_COMPILER_HASH "none")
set(STRATA_GPU_ARCHS "")
if(STRATA_GPU_BACKEND STREQUAL "CUDA")
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES 90)
  endif()
  enable_language(CXX)
  enable_language(CUDA)
  set(CMAKE_CUDA_STANDARD 17)
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
  set(STRATA_CUDA_KERNEL_FLAGS -fmad=false -Xcompiler=-ffp-contract=off)
  string(REPLACE ";" "," STRATA_GPU_ARCHS "${CMAKE_CUDA_ARCHITECTURES}")
  strata_hash(STRATA_GPU_COMPILER_HASH
    "${CMAKE_CUDA_COMPILER_ID};${CMAKE_CUDA_COMPILER_VERSION};${CMAKE_CUDA_ARCHITECTURES};${STRATA_CUDA_KERNEL_FLAGS};${CMAKE_CUDA_FLAGS};${CMAKE_CUDA_FLAGS_${_bt}}")
elseif(STRATA_GPU_BACKEND STREQUAL "HIP")
  enable_language(CXX)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "STRATA_GPU_BACKEND=HIP needs clang++ as the C++ compiler (the hip preset uses clang++-19)")
  endif()
  # The archs the build carries code for: a device of another arch is
  # refused when opened (one line), so the auto backend then uses the CPU.
  # STRATA_HIP_ARCH (one arch) is the older name.
  if(DEFINED STRATA_HIP_ARCH AND NOT DEFINED STRATA_HIP_ARCHS)
    set(STRATA_HIP_ARCHS "${STRATA_HIP_ARCH}")
  endif()
  set(STRATA_HIP_ARCHS "gfx1100" CACHE STRING "AMD GPU architectures the HIP build carries code for (;-separated)")
  # ROCM_PATH: the ROCm (or Debian HIP) prefix; the rocm preset sets
  # /opt/rocm, the hip preset /usr. An environment ROCM_PATH is the default.
  if(DEFINED ENV{ROCM_PATH} AND NOT "$ENV{ROCM_PATH}" STREQUAL "")
    set(_st_rocm_default "$ENV{ROCM_PATH}")
  else()
    set(_st_rocm_default "/usr")
  endif()
  set(ROCM_PATH "${_st_rocm_default}" CACHE PATH "ROCm/HIP install prefix")
  set(ROCM_DEVICE_LIB_PATH "" CACHE PATH "amdgcn bitcode folder (device libraries for the target)")
  if(NOT ROCM_DEVICE_LIB_PATH)
    # ROCm 6/7 packages: ROCM_PATH/amdgcn/bitcode; TheRock and some 6.x:
    # ROCM_PATH/lib/llvm/amdgcn/bitcode or clang's resource dir; Debian:
    # LLVM 17's resource dir (trixie's rocm-device-libs-17, or the copy
    # tools/fetch-gfx11-devlibs.sh extracts).
    file(GLOB _st_res_bc ${ROCM_PATH}/lib/llvm/lib/clang/*/lib/amdgcn/bitcode)
    foreach(cand ${ROCM_PATH}/amdgcn/bitcode ${ROCM_PATH}/lib/llvm/amdgcn/bitcode ${_st_res_bc}
                 /usr/lib/llvm-17/lib/clang/17/amdgcn/bitcode
                 ${PROJECT_SOURCE_DIR}/build/devlibs/usr/lib/llvm-17/lib/clang/17/amdgcn/bitcode)
      if(EXISTS ${cand}/ocml.bc)
        set(ROCM_DEVICE_LIB_PATH ${cand})
        break()
      endif()
    endforeach()
  endif()
  if(NOT ROCM_DEVICE_LIB_PATH)
    message(FATAL_ERROR "HIP: no amdgcn device libraries under ROCM_PATH=${ROCM_PATH}; set ROCM_DEVICE_LIB_PATH "
                        "(tools/fetch-gfx11-devlibs.sh fetches them for the Debian toolchain)")
  endif()
  set(_st_offload "")
  foreach(a ${STRATA_HIP_ARCHS})
    list(APPEND _st_offload --offload-arch=${a})
  endforeach()
  set(STRATA_HIP_KERNEL_FLAGS -xhip ${_st_offload} --rocm-path=${ROCM_PATH}
      --rocm-device-lib-path=${ROCM_DEVICE_LIB_PATH} -ffp-contract=off -std=c++17)
  string(REPLACE ";" "," STRATA_GPU_ARCHS "${STRATA_HIP_ARCHS}")
  find_library(STRATA_HIP_LIBRARY amdhip64 HINTS ${ROCM_PATH}/lib ${ROCM_PATH}/lib64 REQUIRED)
  message(STATUS "HIP: ${CMAKE_CXX_COMPILER} (${CMAKE_CXX_COMPILER_VERSION}), ROCM_PATH ${ROCM_PATH}, archs ${STRATA_HIP_ARCHS}, "
                 "device libraries ${ROCM_DEVICE_LIB_PATH}, runtime ${STRATA_HIP_LIBRARY}")
  strata_hash(STRATA_GPU_COMPILER_HASH
    "${CMAKE_CXX_COMPILER_ID};${CMAKE_CXX_COMPILER_VERSION};${STRATA_HIP_ARCHS};-ffp-contract=off;${CMAKE_CXX_FLAGS};${CMAKE_CXX_FLAGS_${_bt}}")
endif()

# The source commit recorded in the provenance of tables and reports
# (`git rev-parse HEAD` at configure time; "unknown" outside a git checkout
# or without git). Not part of the identity: a table does not refuse because
# the commit changed. CMake configures again when HEAD moves, so a build
# does not keep an old commit.
set(STRATA_SOURCE_COMMIT "unknown")
find_package(Git QUIET)
if(GIT_FOUND)
  execute_process(COMMAND ${GIT_EXECUTABLE} rev-parse HEAD WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}
    OUTPUT_VARIABLE _st_commit OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE _st_rc)
  execute_process(COMMAND ${GIT_EXECUTABLE} rev-parse --absolute-git-dir WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}
    OUTPUT_VARIABLE _st_gitdir OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(_st_rc EQUAL 0 AND _st_commit MATCHES "^[0-9a-f]+$")
    set(STRATA_SOURCE_COMMIT "${_st_commit}")
    foreach(_st_f HEAD logs/HEAD)
      if(EXISTS "${_st_gitdir}/${_st_f}")
        set_property(DIRECTORY ${PROJECT_SOURCE_DIR} APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${_st_gitdir}/${_st_f}")
      endif()
    endforeach()
  endif()
endif()
