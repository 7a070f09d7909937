# cmake --install [--prefix P] lays out:
#   <libdir>/libstrata_tune.so.<version>   the engine library + the SONAME and dev links (or the .a)
#   <libdir>/libstrata_tools.so.<version>  the tools library (links the engine library)
#   include/strata/*.h                     the engine library's API (<strata/strata.h>)
#   include/strata/tools/*.h, strata/tools.h  the tools library's API
#   bin/tune_decode
#   <libdir>/cmake/strata_tune/            find_package(strata_tune): targets strata_tune::strata_tune
#                                          and strata_tune::strata_tools
#   <libdir>/pkgconfig/strata_tune.pc      pkg-config --cflags --libs strata_tune
#   <libdir>/pkgconfig/strata_tools.pc     pkg-config --cflags --libs strata_tools
# Every path is relative to the prefix, so the tree can be installed with
# --prefix or moved as a whole.
include(CMakePackageConfigHelpers)

set(STRATA_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/strata_tune)

install(TARGETS strata_tune strata_tools EXPORT strata_tuneTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/strata DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  FILES_MATCHING PATTERN "*.h")
install(EXPORT strata_tuneTargets NAMESPACE strata_tune:: FILE strata_tuneTargets.cmake
  DESTINATION ${STRATA_INSTALL_CMAKEDIR})

configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/strata_tuneConfig.cmake.in
  ${PROJECT_BINARY_DIR}/strata_tuneConfig.cmake
  INSTALL_DESTINATION ${STRATA_INSTALL_CMAKEDIR})
# Compatible versions follow the SONAME (src/CMakeLists.txt): the same
# major.minor while the major is 0, the same major from 1.0 on.
if(PROJECT_VERSION_MAJOR EQUAL 0)
  set(_st_compat SameMinorVersion)
else()
  set(_st_compat SameMajorVersion)
endif()
write_basic_package_version_file(${PROJECT_BINARY_DIR}/strata_tuneConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY ${_st_compat})
install(FILES ${PROJECT_BINARY_DIR}/strata_tuneConfig.cmake ${PROJECT_BINARY_DIR}/strata_tuneConfigVersion.cmake
  DESTINATION ${STRATA_INSTALL_CMAKEDIR})

# pkg-config. prefix is found from the .pc file's own place (${pcfiledir}),
# unless the install dirs were given as absolute paths.
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}" OR IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
  set(STRATA_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
  set(STRATA_PC_LIBDIR "${CMAKE_INSTALL_FULL_LIBDIR}")
  set(STRATA_PC_INCLUDEDIR "${CMAKE_INSTALL_FULL_INCLUDEDIR}")
else()
  file(RELATIVE_PATH _pc_up /strata-prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig /strata-prefix)
  string(REGEX REPLACE "/$" "" _pc_up "${_pc_up}")
  set(STRATA_PC_PREFIX "\${pcfiledir}/${_pc_up}")
  set(STRATA_PC_LIBDIR "\${prefix}/${CMAKE_INSTALL_LIBDIR}")
  set(STRATA_PC_INCLUDEDIR "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
endif()
# What a static libstrata_tune needs at the final link (pkg-config --static);
# the static libstrata_tools adds cJSON.
set(STRATA_PC_LIBS_PRIVATE "-lpthread -lm")
if(STRATA_GPU_BACKEND STREQUAL "CUDA")
  string(APPEND STRATA_PC_LIBS_PRIVATE " -lcudart_static -ldl -lrt -lstdc++")
elseif(STRATA_GPU_BACKEND STREQUAL "HIP")
  string(APPEND STRATA_PC_LIBS_PRIVATE " -lamdhip64 -lstdc++")
endif()
configure_file(${CMAKE_CURRENT_LIST_DIR}/strata_tune.pc.in ${PROJECT_BINARY_DIR}/strata_tune.pc @ONLY)
configure_file(${CMAKE_CURRENT_LIST_DIR}/strata_tools.pc.in ${PROJECT_BINARY_DIR}/strata_tools.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/strata_tune.pc ${PROJECT_BINARY_DIR}/strata_tools.pc
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
