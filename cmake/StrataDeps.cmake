# cJSON and CMocka from the system (or CMAKE_PREFIX_PATH: the device recipe
# extracts Debian packages into a prefix). find_path/find_library honour
# CMAKE_PREFIX_PATH; the packages' own CMake configs hold absolute /usr paths.
find_path(CJSON_INCLUDE_DIR cjson/cJSON.h)
find_library(CJSON_LIBRARY NAMES cjson)
if(NOT CJSON_INCLUDE_DIR OR NOT CJSON_LIBRARY)
  message(FATAL_ERROR "cJSON not found: install libcjson-dev (apt-get install libcjson-dev)")
endif()
add_library(strata_cjson INTERFACE)
target_include_directories(strata_cjson INTERFACE ${CJSON_INCLUDE_DIR})
target_link_libraries(strata_cjson INTERFACE ${CJSON_LIBRARY})

if(STRATA_BUILD_TESTS)
  find_path(CMOCKA_INCLUDE_DIR cmocka.h)
  find_library(CMOCKA_LIBRARY NAMES cmocka)
  if(NOT CMOCKA_INCLUDE_DIR OR NOT CMOCKA_LIBRARY)
    message(FATAL_ERROR "CMocka not found: install libcmocka-dev, or configure with -DSTRATA_BUILD_TESTS=OFF")
  endif()
endif()

# The HTML report's test parses the page with gumbo, a real HTML5 parser in C
# (Debian's libgumbo-dev). Optional for the build: without it the test is a
# failing placeholder that says what to install (tests/CMakeLists.txt), so a
# CPU test run cannot pass without the parse check.
if(STRATA_BUILD_TESTS)
  find_path(STRATA_GUMBO_INCLUDE_DIR gumbo.h)
  find_library(STRATA_GUMBO_LIBRARY NAMES gumbo)
  if(NOT STRATA_GUMBO_INCLUDE_DIR OR NOT STRATA_GUMBO_LIBRARY)
    message(WARNING "gumbo (libgumbo-dev) not found: report_html_test will fail until it is installed (tools/install-deps.sh)")
  endif()
endif()

find_package(Threads REQUIRED)
