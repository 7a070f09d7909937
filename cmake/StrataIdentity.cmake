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
if(NOT DEFINED STRATA_GPU_COMPILER_HASH)
  set(STRATA_GPU_COMPILER_HASH "none")
endif()
