/* tables.json and `table list`: the index round-trips through its text,
 * survives a kill in the middle of its write (the old index stays whole),
 * is rebuilt when deleted or damaged, agrees with `table check` on which
 * table engages; a folder with tables from three identities (two foreign)
 * says which engages and why the others do not; a superseded table is
 * named and removed only by --prune; provenance comments round-trip and
 * SHA-256 matches its test vectors. */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "strata/table_meta.h"
#include "file_write.h"
#include "out_manifest.h"
#include "sha256.h"
#include "strata/decode.h"
#include "strata/table.h"
#include "table_internal.h"
#include "strata/tools/tables.h"

#include <cjson/cJSON.h>
#include <signal.h>
#include <stdbool.h>
#include <time.h>

#include "test_cli.h"

static st_identity cpu_identity(void)
{
    st_ctx *c = NULL;
    assert_int_equal(st_ctx_create(ST_BACKEND_CPU, 0, &c), ST_OK);
    st_identity id = *st_ctx_identity(c);
    st_ctx_destroy(c);
    return id;
}

/* Writes DIR/NAME: a table for ID with provenance (model MODEL, DATE) and
 * one mmvq row. */
static void make_table(const char *dir, const char *name, const st_identity *id, const char *device, const char *model,
                       const char *date)
{
    st_table *t = NULL;
    assert_int_equal(st_table_create(id, &t), ST_OK);
    st_provenance p;
    memset(&p, 0, sizeof p);
    snprintf(p.tool, sizeof p.tool, "tune_decode %s", st_version());
    snprintf(p.source_commit, sizeof p.source_commit, "0123456789abcdef0123456789abcdef01234567");
    snprintf(p.date, sizeof p.date, "%s", date);
    snprintf(p.device, sizeof p.device, "%s", device);
    snprintf(p.driver, sizeof p.driver, "d1");
    snprintf(p.model, sizeof p.model, "%s", model);
    snprintf(p.model_file, sizeof p.model_file, "%s.gguf", model);
    st_sha256_buf(model, strlen(model), p.model_sha256);
    snprintf(p.token_mix, sizeof p.token_mix, "1,2,4,8");
    snprintf(p.threshold, sizeof p.threshold, "1.0%%");
    snprintf(p.report, sizeof p.report, "strata-%s.autotune.json strata-%s.autotune.html", model, model);
    assert_int_equal(st_provenance_to_table(t, &p), ST_OK);
    assert_int_equal(st_table_add_comment(t, "tuned-default mmvq iq3_s 256 256"), ST_OK);
    st_mmvq_key k = {ST_Q8_0, 512, 256};
    assert_int_equal(st_table_add_mmvq(t, &k, 4), ST_OK);
    assert_int_equal(st_table_write_atomic(t, path_in(dir, name)), ST_OK);
    st_table_destroy(t);
}

/* A folder with this process's table, a gfx1100 and an sm_90 one, and an
 * older build's table for this device and model (superseded). */
static const char *fleet_dir(const st_identity *me)
{
    const char *dir = make_dir();
    make_table(dir, "strata-m-cpu.table", me, me->device_name, "m", "2026-12-01T10:00:00Z");
    st_identity amd = *me, nv = *me, old = *me;
    snprintf(amd.arch, sizeof amd.arch, "gfx1100");
    snprintf(amd.runtime, sizeof amd.runtime, "60342131");
    snprintf(nv.arch, sizeof nv.arch, "sm_90");
    snprintf(nv.runtime, sizeof nv.runtime, "12080");
    snprintf(old.compiler, sizeof old.compiler, "1111222233334444");
    make_table(dir, "strata-m-gfx1100-60342131.table", &amd, "AMD Radeon RX 7900 XTX", "m", "2026-11-20T08:00:00Z");
    make_table(dir, "strata-m-sm_90-12080.table", &nv, "NVIDIA H200", "m", "2026-11-21T08:00:00Z");
    make_table(dir, "strata-m-cpu-oldbuild.table", &old, me->device_name, "m", "2026-11-01T08:00:00Z");
    return dir;
}

static const st_tables_entry *entry(const st_tables_index *ix, const char *file)
{
    for (int i = 0; i < ix->n; i++)
        if (!strcmp(ix->e[i].file, file)) return &ix->e[i];
    fail_msg("no entry for %s", file);
    return NULL;
}

/* ---- SHA-256 and provenance ---------------------------------------------- */

static void sha256_matches_fips_vectors(void **state)
{
    (void)state;
    char hex[ST_SHA256_HEX];
    st_sha256_buf("", 0, hex);
    assert_string_equal(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    st_sha256_buf("abc", 3, hex);
    assert_string_equal(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    static const char two[] = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    st_sha256_buf(two, sizeof two - 1, hex);
    assert_string_equal(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    /* a million 'a' fed in uneven pieces */
    st_sha256 s;
    st_sha256_init(&s);
    char a[1000];
    memset(a, 'a', sizeof a);
    for (int done = 0, step = 1; done < 1000000; done += step, step = step % 997 + 1)
        st_sha256_update(&s, a, (size_t)(done + step > 1000000 ? 1000000 - done : step));
    st_sha256_hex(&s, hex);
    assert_string_equal(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

static void provenance_round_trips_and_reads_the_old_lines(void **state)
{
    (void)state;
    st_identity me = cpu_identity();
    const char *dir = make_dir();
    make_table(dir, "a.table", &me, "dev <x>", "model-a", "2026-12-01T10:00:00Z");
    char *buf = NULL;
    size_t len = 0;
    buf = slurp(path_in(dir, "a.table"), &len);
    st_table *t = NULL;
    assert_int_equal(st_table_parse_any(buf, len, "a.table", &t, NULL, 0), ST_OK);
    st_provenance p;
    st_provenance_from_table(t, &p);
    assert_string_equal(p.device, "dev <x>");
    assert_string_equal(p.model, "model-a");
    assert_string_equal(p.model_file, "model-a.gguf");
    assert_string_equal(p.token_mix, "1,2,4,8");
    assert_string_equal(p.date, "2026-12-01T10:00:00Z");
    assert_string_equal(p.report, "strata-model-a.autotune.json strata-model-a.autotune.html");
    st_table_destroy(t);
    free(buf);
    /* the lines tables made before this carried */
    static const char old[] = "cpu 0.2.0 c 3\n# made by tune_decode 0.1.0 on 2026-10-01T00:00:00Z, device Box, driver 7\n"
                              "# report: /some/dir/strata-x.autotune.json; threshold 2.0%\n";
    assert_int_equal(st_table_parse_any(old, sizeof old - 1, "old.table", &t, NULL, 0), ST_OK);
    st_provenance_from_table(t, &p);
    assert_string_equal(p.tool, "tune_decode 0.1.0");
    assert_string_equal(p.date, "2026-10-01T00:00:00Z");
    assert_string_equal(p.device, "Box");
    assert_string_equal(p.driver, "7");
    assert_string_equal(p.report, "strata-x.autotune.json");
    assert_string_equal(p.threshold, "2.0%");
    assert_int_equal(st_table_comment_kind(st_table_comment_at(t, 0)), ST_COMMENT_PROVENANCE);
    st_table_destroy(t);
    /* table show prints them */
    char *const argv[] = {CLI, "table", "show", path_in(dir, "a.table"), NULL};
    char *out = NULL;
    assert_int_equal(run_cli(argv, &out, NULL), 0);
    static const char *const want[] = {"tool             tune_decode ", "source commit    0123456789abcdef",
                                       "campaign date    2026-12-01T10:00:00Z", "model sha256     ",
                                       "token mix        1,2,4,8", "report           strata-model-a.autotune.json"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        if (!strstr(out, want[i])) fail_msg("table show lacks '%s':\n%s", want[i], out);
    free(out);
}

/* ---- the index ------------------------------------------------------------- */

static void index_round_trips(void **state)
{
    (void)state;
    st_identity me = cpu_identity();
    const char *dir = fleet_dir(&me);
    st_dispatch_config cfg;
    st_dispatch_config_default(&cfg);
    st_tables_index *ix = NULL, *back = NULL;
    assert_int_equal(st_tables_index_build(dir, &me, &cfg, &ix), ST_OK);
    assert_int_equal(ix->n, 4);
    char *a = NULL, *b = NULL;
    size_t al = 0, bl = 0;
    assert_int_equal(st_tables_index_format(ix, &a, &al), ST_OK);
    assert_int_equal(st_tables_index_parse(a, al, &back), ST_OK);
    assert_int_equal(st_tables_index_format(back, &b, &bl), ST_OK);
    assert_int_equal(al, bl);
    assert_memory_equal(a, b, al);
    /* the fields came back, not only the bytes */
    const st_tables_entry *x = entry(back, "strata-m-gfx1100-60342131.table"), *y = entry(ix, "strata-m-gfx1100-60342131.table");
    assert_string_equal(x->id.arch, "gfx1100");
    assert_string_equal(x->id.device_name, "AMD Radeon RX 7900 XTX");
    assert_string_equal(x->prov.model_sha256, y->prov.model_sha256);
    assert_string_equal(x->sha256, y->sha256);
    assert_int_equal(x->status, ST_TSTATUS_REFUSED);
    assert_string_equal(x->status_line, y->status_line);
    assert_int_equal(x->n_shapes, 2);
    assert_int_equal(x->n_rows, 1);
    assert_string_equal(x->shapes[0].key, "mmvq q8_0 512 256");
    assert_string_equal(x->shapes[0].choice, "rows 4");
    assert_string_equal(x->shapes[1].choice, "default");
    assert_string_equal(back->engages, "strata-m-cpu.table");
    /* damaged texts are refused, whole */
    static const char *const bad[] = {"", "{}", "{\"format\":\"strata-tables-index\",\"version\":2}", "[]"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        st_tables_index *z = (st_tables_index *)0x1;
        assert_int_equal(st_tables_index_parse(bad[i], strlen(bad[i]), &z), ST_ERR_PARSE);
        assert_null(z);
    }
    /* a field of the wrong type anywhere: damaged */
    const char *p = strstr(a, "\"rows\":\t1,");
    assert_non_null(p);
    char *w = malloc(al + 8);
    assert_non_null(w);
    snprintf(w, al + 8, "%.*s\"rows\":\t\"1\"%s", (int)(p - a), a, p + 9); /* valid JSON, a string where a number belongs */
    cJSON *chk = cJSON_Parse(w);
    assert_non_null(chk);
    cJSON_Delete(chk);
    st_tables_index *z = NULL;
    assert_int_equal(st_tables_index_parse(w, strlen(w), &z), ST_ERR_PARSE);
    st_tables_index_free(back);
    free(w);
    free(a);
    free(b);
    st_tables_index_free(ix);
}

/* The child writes a new index and is killed between its temporary file and
 * the rename (the hook), or at a random moment while writing in a loop: the
 * index on disk is always one whole index, the old or the new. */
static void die_here(const char *tmp)
{
    (void)tmp;
    raise(SIGKILL);
}

static void index_survives_a_kill_during_its_write(void **state)
{
    (void)state;
    st_identity me = cpu_identity();
    const char *dir = fleet_dir(&me);
    st_dispatch_config cfg;
    st_dispatch_config_default(&cfg);
    st_tables_index *ix = NULL;
    st_index_state before;
    bool wrote = false;
    assert_int_equal(st_tables_index_update(dir, &me, &cfg, true, &ix, &before, &wrote), ST_OK);
    assert_int_equal(before, ST_INDEX_MISSING);
    assert_true(wrote);
    size_t ol = 0;
    char *old = slurp(path_in(dir, ST_TABLES_INDEX_NAME), &ol);
    /* a change the killed writer would have recorded */
    make_table(dir, "strata-n-cpu.table", &me, me.device_name, "n", "2026-12-02T10:00:00Z");
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        st_file_write_before_rename = die_here;
        st_tables_index *nx = NULL;
        st_tables_index_update(dir, &me, &cfg, true, &nx, &before, &wrote);
        _exit(0); /* not reached */
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    size_t nl = 0;
    char *now = slurp(path_in(dir, ST_TABLES_INDEX_NAME), &nl);
    assert_int_equal(nl, ol);
    assert_memory_equal(now, old, ol);
    free(now);
    /* killed at random moments while rewriting the index in a loop */
    srand((unsigned)time(NULL));
    for (int round = 0; round < 20; round++) {
        fflush(NULL);
        pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            for (;;) {
                st_tables_index *nx = NULL;
                if (st_tables_index_update(dir, &me, &cfg, true, &nx, &before, &wrote) != ST_OK) _exit(3);
                st_tables_index_free(nx);
            }
        }
        struct timespec ts = {0, 1000000L + (long)(rand() % 20000) * 1000L};
        nanosleep(&ts, NULL);
        kill(pid, SIGKILL);
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFSIGNALED(status));
        char *text = slurp(path_in(dir, ST_TABLES_INDEX_NAME), &nl);
        st_tables_index *back = NULL;
        if (st_tables_index_parse(text, nl, &back) != ST_OK) fail_msg("round %d: the index is not whole:\n%s", round, text);
        assert_true(back->n == 4 || back->n == 5);
        st_tables_index_free(back);
        free(text);
    }
    /* the killed writers' temporary files are not tables: the loader and the
     * index ignore them */
    st_tables_index *after = NULL;
    assert_int_equal(st_tables_index_build(dir, &me, &cfg, &after), ST_OK);
    assert_int_equal(after->n, 5);
    st_tables_index_free(after);
    free(old);
    st_tables_index_free(ix);
}

static cJSON *list_json(const char *dir, int *rc)
{
    char *const argv[] = {CLI, "--backend", "cpu", "--json", "table", "list", (char *)dir, NULL};
    char *out = NULL;
    *rc = run_cli(argv, &out, NULL);
    cJSON *j = cJSON_Parse(out);
    if (!j) fail_msg("table list --json is not JSON:\n%s", out);
    free(out);
    return j;
}

static void index_is_rebuilt_when_deleted_or_damaged(void **state)
{
    (void)state;
    st_identity me = cpu_identity();
    const char *dir = fleet_dir(&me);
    const char *idx = path_in(dir, ST_TABLES_INDEX_NAME);
    static const char *const damage[] = {NULL, "{\"format\": \"strata-tables-index\", \"vers", "garbage\n"};
    static const char *const state_text[] = {"missing", "damaged", "damaged"};
    for (int i = 0; i < 3; i++) {
        if (damage[i]) spit(idx, damage[i]);
        else unlink(idx);
        int rc = 0;
        cJSON *j = list_json(dir, &rc);
        assert_int_equal(rc, 0);
        assert_string_equal(cJSON_GetObjectItem(j, "index_state")->valuestring, state_text[i]);
        assert_true(cJSON_IsTrue(cJSON_GetObjectItem(j, "index_written")));
        cJSON_Delete(j);
        size_t len = 0;
        char *text = slurp(idx, &len);
        st_tables_index *ix = NULL;
        assert_int_equal(st_tables_index_parse(text, len, &ix), ST_OK);
        assert_int_equal(ix->n, 4);
        st_tables_index_free(ix);
        free(text);
        /* and is then up to date, until a table changes */
        j = list_json(dir, &rc);
        assert_string_equal(cJSON_GetObjectItem(j, "index_state")->valuestring, "up to date");
        cJSON_Delete(j);
    }
    make_table(dir, "strata-m-cpu.table", &me, me.device_name, "m", "2026-12-03T10:00:00Z");
    int rc = 0;
    cJSON *j = list_json(dir, &rc);
    assert_string_equal(cJSON_GetObjectItem(j, "index_state")->valuestring, "stale (the tables changed)");
    cJSON_Delete(j);
}

/* `table list` and `table check` agree on the folder: the same line, the
 * same exit status, the table that engages. */
static void list_agrees_with_check(void **state)
{
    (void)state;
    st_identity me = cpu_identity();
    const char *dir = fleet_dir(&me);
    for (int step = 0; step < 3; step++) {
        if (step == 1) /* a second table of this identity: the loader refuses the folder */
            make_table(dir, "strata-z-cpu.table", &me, me.device_name, "z", "2026-12-01T11:00:00Z");
        if (step == 2) { /* only foreign tables left */
            unlink(path_in(dir, "strata-m-cpu.table"));
            unlink(path_in(dir, "strata-z-cpu.table"));
            unlink(path_in(dir, "strata-m-cpu-oldbuild.table"));
        }
        int lrc = 0;
        cJSON *l = list_json(dir, &lrc);
        char *const argv[] = {CLI, "--backend", "cpu", "--json", "table", "check", (char *)dir, NULL};
        char *out = NULL;
        const int crc = run_cli(argv, &out, NULL);
        cJSON *c = cJSON_Parse(out);
        assert_non_null(c);
        free(out);
        assert_int_equal(lrc, crc);
        assert_string_equal(cJSON_GetObjectItem(l, "load_line")->valuestring, cJSON_GetObjectItem(c, "message")->valuestring);
        const bool engages = cJSON_IsTrue(cJSON_GetObjectItem(c, "engages"));
        const char *which = cJSON_GetObjectItem(l, "engages")->valuestring;
        assert_int_equal(engages, which[0] != '\0');
        assert_int_equal(engages, step == 0);
        if (step == 0) assert_string_equal(which, "strata-m-cpu.table");
        /* per table: engages here only for that one */
        const cJSON *t;
        int n_eng = 0;
        cJSON_ArrayForEach(t, cJSON_GetObjectItem(cJSON_GetObjectItem(l, "index"), "tables"))
            n_eng += !strcmp(cJSON_GetObjectItem(t, "status")->valuestring, "engages here");
        assert_int_equal(n_eng, engages ? 1 : 0);
        if (step == 1) { /* the older of the two is superseded; the newer is refused with the folder's line */
            cJSON_ArrayForEach(t, cJSON_GetObjectItem(cJSON_GetObjectItem(l, "index"), "tables"))
            {
                const char *f = cJSON_GetObjectItem(t, "file")->valuestring, *st = cJSON_GetObjectItem(t, "status")->valuestring;
                if (!strcmp(f, "strata-z-cpu.table")) {
                    assert_string_equal(st, "refused here");
                    assert_non_null(strstr(cJSON_GetObjectItem(t, "status_line")->valuestring, "tables match this process"));
                }
                if (!strcmp(f, "strata-m-cpu.table")) assert_string_equal(st, "superseded");
            }
        }
        cJSON_Delete(l);
        cJSON_Delete(c);
    }
}

static void list_shows_three_identities_and_prunes_only_superseded(void **state)
{
    (void)state;
    st_identity me = cpu_identity();
    const char *dir = fleet_dir(&me);
    spit(path_in(dir, "strata-m.autotune.json"), "{\"table\":{\"path\":\"/elsewhere/strata-m-cpu.table\"}}\n");
    char *const argv[] = {CLI, "--backend", "cpu", "table", "list", (char *)dir, NULL};
    char *out = NULL;
    assert_int_equal(run_cli(argv, &out, NULL), 0);
    static const char *const want[] = {
        "engages here: strata-m-cpu.table\n  decode tuning: ",
        "strata-m-gfx1100-60342131.table: decode tuning: ",
        "strata-m-gfx1100-60342131.table: made for gfx1100, this device is cpu: run the tuner on this device",
        "strata-m-sm_90-12080.table: made for sm_90, this device is cpu: run the tuner on this device",
        "strata-m-cpu-oldbuild.table: superseded by strata-m-cpu.table",
        "made by compiler 1111.., this build is",
        "AMD Radeon RX 7900 XTX", "NVIDIA H200",
        "strata-m.autotune.json (describes strata-m-cpu.table)"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        if (!strstr(out, want[i])) fail_msg("table list lacks '%s':\n%s", want[i], out);
    /* the status column: one engages, two refused, one superseded */
    assert_non_null(strstr(out, "* strata-m-cpu.table "));
    free(out);
    /* nothing was deleted by listing */
    static const char *const files[] = {"strata-m-cpu.table", "strata-m-gfx1100-60342131.table", "strata-m-sm_90-12080.table",
                                        "strata-m-cpu-oldbuild.table"};
    for (int i = 0; i < 4; i++) assert_true(file_exists(path_in(dir, files[i])));
    /* --prune removes the superseded one a manifest proves ours (the tune
     * that made it wrote one), says so, keeps the foreign ones and the one
     * that engages */
    const char *mine[1] = {"strata-m-cpu-oldbuild.table"};
    const st_mf_role role[1] = {ST_MF_TABLE};
    assert_int_equal(st_manifest_write_files(dir, path_in(dir, "old.autotune.manifest"), mine, role, 1), ST_OK);
    char *const prune[] = {CLI, "--backend", "cpu", "table", "list", (char *)dir, "--prune", NULL};
    assert_int_equal(run_cli(prune, &out, NULL), 0);
    if (!strstr(out, "prune: removed strata-m-cpu-oldbuild.table (superseded by strata-m-cpu.table)"))
        fail_msg("--prune did not name the table it removed:\n%s", out);
    free(out);
    assert_false(file_exists(path_in(dir, "strata-m-cpu-oldbuild.table")));
    assert_false(file_exists(path_in(dir, "old.autotune.manifest"))); /* it proves nothing any more */
    for (int i = 0; i < 3; i++) assert_true(file_exists(path_in(dir, files[i])));
    assert_true(file_exists(path_in(dir, "strata-m.autotune.json"))); /* it describes another table: kept */
    /* the index was rewritten without it */
    size_t len = 0;
    char *text = slurp(path_in(dir, ST_TABLES_INDEX_NAME), &len);
    st_tables_index *ix = NULL;
    assert_int_equal(st_tables_index_parse(text, len, &ix), ST_OK);
    assert_int_equal(ix->n, 3);
    st_tables_index_free(ix);
    free(text);
    /* a second prune has nothing to do */
    assert_int_equal(run_cli(prune, &out, NULL), 0);
    assert_non_null(strstr(out, "prune: nothing is superseded; nothing removed"));
    free(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(sha256_matches_fips_vectors),
        cmocka_unit_test(provenance_round_trips_and_reads_the_old_lines),
        cmocka_unit_test(index_round_trips),
        cmocka_unit_test(index_survives_a_kill_during_its_write),
        cmocka_unit_test(index_is_rebuilt_when_deleted_or_damaged),
        cmocka_unit_test(list_agrees_with_check),
        cmocka_unit_test(list_shows_three_identities_and_prunes_only_superseded),
    };
    return cmocka_run_group_tests(tests, NULL, teardown_dirs);
}
