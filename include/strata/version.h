/* strata-tune: the library version and the export marker of the public API.
 *
 * The version follows semantic versioning. CMake reads these three numbers
 * (the project version, the shared library's SONAME) from this file, so
 * they cannot disagree. See docs/API.md "Versions and the ABI". */
#ifndef STRATA_VERSION_H
#define STRATA_VERSION_H

#define STRATA_VERSION_MAJOR 0
#define STRATA_VERSION_MINOR 4
#define STRATA_VERSION_PATCH 0

/* One integer that grows with every release: 0x00MMmmpp. */
#define STRATA_VERSION_HEX \
    ((STRATA_VERSION_MAJOR << 16) | (STRATA_VERSION_MINOR << 8) | STRATA_VERSION_PATCH)

/* Marks the functions the shared library exports. The library is built with
 * hidden visibility by default, so nothing else leaves it. */
#if defined(__GNUC__) || defined(__clang__)
#define ST_API __attribute__((visibility("default")))
#else
#define ST_API
#endif

#endif
