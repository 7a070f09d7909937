# Toolchain of the `rocm` preset: a ROCm 6/7 install (ROCm's docs: the HIP
# compilers are ROCm's clang, /opt/rocm/lib/llvm/bin/clang++ (also reached as
# /opt/rocm/bin/amdclang++), and the hipcc driver /opt/rocm/bin/hipcc; the
# device libraries are /opt/rocm/amdgcn/bitcode; libamdhip64 is in
# /opt/rocm/lib). ROCM_PATH picks the install: -DROCM_PATH=..., else the
# environment's ROCM_PATH, else /opt/rocm. The compilers come from
# ROCM_PATH/lib/llvm/bin (ROCm 5: ROCM_PATH/llvm/bin) unless
# CMAKE_C_COMPILER / CMAKE_CXX_COMPILER are given: the project compiles its
# .hip sources as C++ with clang's -xhip, so clang++ is used, not hipcc
# (hipcc only adds flags the build passes itself: --offload-arch,
# --rocm-path, --rocm-device-lib-path).
# try_compile projects read this file again without the cache: the
# compilers are already chosen there.
get_property(_st_in_try GLOBAL PROPERTY IN_TRY_COMPILE)
if(_st_in_try)
  return()
endif()
if(NOT ROCM_PATH)
  if(DEFINED ENV{ROCM_PATH} AND NOT "$ENV{ROCM_PATH}" STREQUAL "")
    set(ROCM_PATH "$ENV{ROCM_PATH}")
  else()
    set(ROCM_PATH "/opt/rocm")
  endif()
endif()
set(ROCM_PATH "${ROCM_PATH}" CACHE PATH "ROCm install prefix")
foreach(_st_bin ${ROCM_PATH}/lib/llvm/bin ${ROCM_PATH}/llvm/bin)
  if(NOT CMAKE_CXX_COMPILER AND EXISTS ${_st_bin}/clang++)
    set(CMAKE_CXX_COMPILER ${_st_bin}/clang++)
  endif()
  if(NOT CMAKE_C_COMPILER AND EXISTS ${_st_bin}/clang)
    set(CMAKE_C_COMPILER ${_st_bin}/clang)
  endif()
endforeach()
if(NOT CMAKE_CXX_COMPILER)
  message(FATAL_ERROR "rocm preset: no clang++ under ROCM_PATH=${ROCM_PATH} (lib/llvm/bin or llvm/bin): "
                      "set ROCM_PATH to the ROCm install, or CMAKE_CXX_COMPILER")
endif()
list(APPEND CMAKE_PREFIX_PATH ${ROCM_PATH})
