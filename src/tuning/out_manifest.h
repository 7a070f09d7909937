/* The manifest of a run in a tables folder (internal to the tools
 * library): one small text file per run, "<report stem>.manifest" beside
 * the run's report ("strata-<model>.autotune.json" -> "strata-<model>.autotune.manifest"),
 * that lists every file the run left in the folder, each with the SHA-256
 * of the bytes it wrote:
 *
 *     strata-tune manifest 1
 *     # run: <date> tune_decode <version>
 *     table	<sha256>	strata-<model>-cpu-0.4.0.table
 *     report	<sha256>	strata-<model>.autotune.json
 *     page	<sha256>	strata-<model>.autotune.html
 *     index	-	tables.json
 *
 * A tune installs its manifest with the table and the report as one set
 * (tune_journal.c), listing too the earlier tables the manifest it
 * replaces listed that are still there as they were (a table of an older
 * runtime: st_manifest_carry_tables); a run that installs nothing writes the manifest of its
 * not-installed report. `table list --prune` removes a file only when the
 * index says it is superseded (or the report of a superseded table) and a
 * manifest of the folder lists it, under its name and role, with the bytes
 * it has now (st_manifests_prove): a file the user put there, or changed
 * since, is never proven ours. Names follow the file rule (file_write.h);
 * the index's entry has no hash: every run rewrites it. */
#ifndef ST_OUT_MANIFEST_H
#define ST_OUT_MANIFEST_H

#include "sha256.h"
#include "strata/status.h"

#include <stdbool.h>
#include <stddef.h>

#define ST_MANIFEST_EXT ".manifest"
#define ST_MANIFEST_HEAD "strata-tune manifest 1"
/* a tune's set is four entries; the rest hold the earlier tables a tune
 * carries over (st_manifest_carry_tables) */
#define ST_MANIFEST_MAX_ENTRIES 16
#define ST_MANIFEST_MAX_BYTES (16 << 10)

/* ST_MF_PROFILE: a settings run's profile (tune_decode settings writes its
 * report, page and profile with a manifest of them, as one set). */
typedef enum { ST_MF_TABLE, ST_MF_REPORT, ST_MF_PAGE, ST_MF_INDEX, ST_MF_PROFILE } st_mf_role;

typedef struct {
    st_mf_role role;
    char name[256];
    char sha256[ST_SHA256_HEX]; /* "" for the index */
} st_mf_entry;

typedef struct {
    st_mf_entry e[ST_MANIFEST_MAX_ENTRIES];
    int n;
} st_manifest;

/* Adds an entry; TEXT/LEN are the bytes written (ignored for the index).
 * ST_ERR_INVALID_ARG when NAME is not a plain name or the manifest is full. */
st_status st_manifest_add(st_manifest *m, st_mf_role role, const char *name, const char *text, size_t len);

/* The manifest's text (malloc'd, the caller frees). */
st_status st_manifest_format(const st_manifest *m, char **text, size_t *len);

/* Parses TEXT[0..LEN): ST_ERR_PARSE with one line when it is not a
 * manifest this tool wrote (the head, a role, a hash, a plain name). */
st_status st_manifest_parse(const char *text, size_t len, st_manifest *m);

/* The manifest's path for the report at REPORT_PATH (".json" ending, the
 * manifest's ending in its place); NULL when out of memory or the path
 * does not end in ".json". */
char *st_manifest_path_for(const char *report_path);

/* Whether the regular file at PATH (a link is not followed) is a manifest
 * this tool wrote, into M. */
bool st_manifest_read(const char *path, st_manifest *m);

/* The manifests of DIR: every regular "*.manifest" file with a plain name
 * whose text parses (others are skipped). *NAMES[i] is the file name of
 * (*OUT)[i]; both malloc'd, freed with st_manifests_free. */
st_status st_manifests_read(const char *dir, st_manifest **out, char ***names, int *n);
void st_manifests_free(st_manifest *ms, char **names, int n);

/* ST_ERR_EXISTS with one line when a manifest of PATH's folder other than
 * OWN (the path of the manifest the writing run replaces; NULL: none)
 * lists PATH's name: the file belongs to another run's set, which writing
 * over it would break (a settings report over a tune's, a page over a
 * profile). A folder that cannot be read has no manifests. */
st_status st_manifest_not_others(const char *path, const char *own);

/* The first manifest of MS[0..N) that lists NAME in ROLE with SHA256, or
 * -1: proof that the file is ours and has the bytes its run wrote. */
int st_manifests_prove(const st_manifest *ms, int n, st_mf_role role, const char *name, const char *sha256);

/* The SHA-256 of the bytes of DIR/NAME, a regular file (a link is not
 * followed), into HEX; "" when it is none or cannot be read. */
void st_manifest_file_sha(const char *dir, const char *name, char hex[ST_SHA256_HEX]);

/* Adds to M (the manifest a run is about to write at PATH, in DIR) the
 * tables the manifest standing at PATH lists that M does not, each still
 * a regular file of DIR with the bytes listed: a re-tune after a runtime
 * or build upgrade replaces the manifest that proved the old table (the
 * report set is named after the model, the table after the runtime too),
 * and without this `table list --prune` could never prove the superseded
 * table ours. A manifest that is absent or not ours adds nothing; those
 * beyond M's room are left out (the oldest first kept). */
void st_manifest_carry_tables(st_manifest *m, const char *dir, const char *path);

/* Writes the manifest at PATH (atomically) for the files NAMES[0..N) of
 * DIR in ROLES, hashing what is on disk now (a run that wrote them one by
 * one: the not-installed report and its page). */
st_status st_manifest_write_files(const char *dir, const char *path, const char *const *names, const st_mf_role *roles,
                                  int n);

#endif
