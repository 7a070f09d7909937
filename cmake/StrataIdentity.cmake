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
if(STRATA_GPU_BACKEND STREQUAL "CUDA")
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES 90)
  endif()
  enable_language(CXX)
  enable_language(CUDA)
  set(CMAKE_CUDA_STANDARD 17)
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
  set(STRATA_CUDA_KERNEL_FLAGS -fmad=false -Xcompiler=-ffp-contract=off)
  strata_hash(STRATA_GPU_COMPILER_HASH
    "${CMAKE_CUDA_COMPILER_ID};${CMAKE_CUDA_COMPILER_VERSION};${CMAKE_CUDA_ARCHITECTURES};${STRATA_CUDA_KERNEL_FLAGS};${CMAKE_CUDA_FLAGS};${CMAKE_CUDA_FLAGS_${_bt}}")
elseif(STRATA_GPU_BACKEND STREQUAL "HIP")
  enable_language(CXX)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "STRATA_GPU_BACKEND=HIP needs clang++ as the C++ compiler (the hip preset uses clang++-19)")
  endif()
  set(STRATA_HIP_ARCH "gfx1100" CACHE STRING "AMD GPU architecture")
  set(ROCM_PATH "/usr" CACHE PATH "ROCm/HIP install prefix")
  set(ROCM_DEVICE_LIB_PATH "" CACHE PATH "amdgcn bitcode folder (device libraries for the target)")
  if(NOT ROCM_DEVICE_LIB_PATH)
    foreach(cand /opt/rocm/amdgcn/bitcode /usr/lib/llvm-17/lib/clang/17/amdgcn/bitcode ${PROJECT_SOURCE_DIR}/build/devlibs/usr/lib/llvm-17/lib/clang/17/amdgcn/bitcode)
      if(EXISTS ${cand}/ocml.bc)
        set(ROCM_DEVICE_LIB_PATH ${cand})
        break()
      endif()
    endforeach()
  endif()
  if(NOT ROCM_DEVICE_LIB_PATH)
    message(FATAL_ERROR "HIP: no amdgcn device libraries found; set ROCM_DEVICE_LIB_PATH (tools/gfx1100-check.sh fetches them)")
  endif()
  set(STRATA_HIP_KERNEL_FLAGS -xhip --offload-arch=${STRATA_HIP_ARCH} --rocm-path=${ROCM_PATH}
      --rocm-device-lib-path=${ROCM_DEVICE_LIB_PATH} -ffp-contract=off -std=c++17)
  find_library(STRATA_HIP_LIBRARY amdhip64 REQUIRED)
  strata_hash(STRATA_GPU_COMPILER_HASH
    "${CMAKE_CXX_COMPILER_ID};${CMAKE_CXX_COMPILER_VERSION};${STRATA_HIP_ARCH};-ffp-contract=off;${CMAKE_CXX_FLAGS};${CMAKE_CXX_FLAGS_${_bt}}")
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
