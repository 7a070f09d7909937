/* SHA-256 (FIPS 180-4), for the provenance of tables: the model file's hash
 * and each table file's hash in tables.json, so a user can check them with
 * the standard sha256sum. Not used for security. */
#ifndef ST_SHA256_H
#define ST_SHA256_H

#include "strata/status.h"

#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint32_t h[8];
    uint64_t bytes;
    unsigned char buf[64];
    size_t fill;
} st_sha256;

#define ST_SHA256_HEX 65 /* 64 hex digits and the NUL */

void st_sha256_init(st_sha256 *s);
void st_sha256_update(st_sha256 *s, const void *data, size_t n);
/* Finishes and writes the digest as 64 lowercase hex digits into HEX. */
void st_sha256_hex(st_sha256 *s, char hex[ST_SHA256_HEX]);
/* The hash of DATA[0..N). */
void st_sha256_buf(const void *data, size_t n, char hex[ST_SHA256_HEX]);
/* The hash of the file at PATH, read in chunks (models are many GB). */
st_status st_sha256_file(const char *path, char hex[ST_SHA256_HEX]);

#endif
