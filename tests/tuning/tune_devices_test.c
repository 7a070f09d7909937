/* Several devices into one folder (include/strata/tools/devices.h): the pass
 * plan with scripted changes (agreement, a change confirmed by the others,
 * a disagreement that does not settle), the grouping by identity, the
 * --device list; and on the CPU backend, `tune --device all` end to end
 * (per-device report name, the device on every line, --json), the list
 * refused before anything is written, verify/coverage per device, and the
 * commands that take one device. */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "strata/decode.h"
#include "strata/identity.h"
#include "ctx_internal.h"
#include "strata/tools/devices.h"

#include <cjson/cJSON.h>

#include "test_cli.h"

#define MODEL STRATA_TEST_DATA "/gguf/tiny-moe.gguf"

/* Runs the plan for N devices on CHANGED[] (one entry per pass, as many as
 * it asks for); returns the passes and the devices in ORDER. */
static int play(int n, const int *changed, int n_changed, int *order, st_devices_plan *p)
{
    st_devices_plan_init(p, n);
    int passes = 0;
    for (int d = p->next; d >= 0; passes++) {
        assert_true(passes < n_changed);
        order[passes] = d;
        d = st_devices_plan_step(p, changed[passes]);
    }
    return passes;
}

static void plan_one_device_is_one_pass(void **state)
{
    (void)state;
    st_devices_plan p;
    int order[4];
    const int ch[] = {3};
    assert_int_equal(play(1, ch, 1, order, &p), 1);
    assert_true(p.agreed);
    assert_int_equal(p.changes, 0); /* against an earlier campaign: not a disagreement */
    assert_int_equal(order[0], 0);
}

static void plan_devices_that_change_nothing_agree_in_one_round(void **state)
{
    (void)state;
    st_devices_plan p;
    int order[8];
    const int ch[] = {-1, 0, 0, 0};
    assert_int_equal(play(4, ch, 4, order, &p), 4);
    assert_true(p.agreed);
    for (int i = 0; i < 4; i++) assert_int_equal(order[i], i);
    /* an earlier table in the folder: the first pass's changes do not count */
    const int ch2[] = {5, 0};
    assert_int_equal(play(2, ch2, 2, order, &p), 2);
    assert_true(p.agreed);
    assert_int_equal(p.changes, 0);
}

static void plan_a_change_is_confirmed_by_every_other_device(void **state)
{
    (void)state;
    st_devices_plan p;
    int order[8];
    /* device 1 changes two choices; device 0 must then confirm them */
    const int ch[] = {-1, 2, 0};
    assert_int_equal(play(2, ch, 3, order, &p), 3);
    assert_true(p.agreed);
    assert_int_equal(p.changes, 2);
    assert_int_equal(order[2], 0);
    /* three devices: device 2 changes one; 0 and 1 confirm */
    const int ch3[] = {-1, 0, 1, 0, 0};
    assert_int_equal(play(3, ch3, 5, order, &p), 5);
    assert_true(p.agreed);
    assert_int_equal(order[3], 0);
    assert_int_equal(order[4], 1);
    /* ... but a confirmation before the change does not count */
    const int ch4[] = {-1, 0, 1, 0, 1, 0};
    assert_int_equal(play(3, ch4, 6, order, &p), 6);
    assert_false(p.agreed);
    assert_int_equal(p.changes, 2);
}

static void plan_a_disagreement_ends_after_two_passes_per_device(void **state)
{
    (void)state;
    st_devices_plan p;
    int order[8];
    const int ch[] = {-1, 2, 1, 1};
    assert_int_equal(play(2, ch, 4, order, &p), 4);
    assert_false(p.agreed);
    assert_int_equal(p.changes, 4);
    const int want[] = {0, 1, 0, 1};
    for (int i = 0; i < 4; i++) assert_int_equal(order[i], want[i]);
    /* the plan is done: a further step changes nothing */
    assert_int_equal(st_devices_plan_step(&p, 7), -1);
    assert_int_equal(p.changes, 4);
}

static st_identity ident(const char *model)
{
    st_identity id;
    memset(&id, 0, sizeof id);
    snprintf(id.arch, sizeof id.arch, "sm_90");
    snprintf(id.runtime, sizeof id.runtime, "13000");
    snprintf(id.compiler, sizeof id.compiler, "abcdef0123456789");
    id.space = STRATA_SELECTION_SPACE;
    snprintf(id.model, sizeof id.model, "%s", model);
    return id;
}

static void devices_of_one_model_share_a_group(void **state)
{
    (void)state;
    st_identity ids[5] = {ident("nvidia-h200-132cu"), ident("nvidia-h100-132cu"), ident("nvidia-h200-132cu"),
                          ident("nvidia-h100-132cu"), ident("nvidia-h200-132cu")};
    int g[5];
    assert_int_equal(st_devices_group(ids, 5, g), 2);
    const int want[] = {0, 1, 0, 1, 0};
    for (int i = 0; i < 5; i++) assert_int_equal(g[i], want[i]);
    /* one token of the identity apart (the runtime) is another table */
    snprintf(ids[2].runtime, sizeof ids[2].runtime, "12080");
    assert_int_equal(st_devices_group(ids, 5, g), 3);
    assert_int_equal(g[2], 2);
    assert_int_equal(g[4], 0);
}

static void device_lists_parse_or_say_why(void **state)
{
    (void)state;
    int v[ST_DEVICES_MAX];
    bool all;
    char msg[96];
    assert_int_equal(st_devices_parse("all", v, ST_DEVICES_MAX, &all, msg, sizeof msg), 0);
    assert_true(all);
    assert_int_equal(st_devices_parse("3", v, ST_DEVICES_MAX, &all, msg, sizeof msg), 1);
    assert_false(all);
    assert_int_equal(v[0], 3);
    assert_int_equal(st_devices_parse("0,1,7", v, ST_DEVICES_MAX, &all, msg, sizeof msg), 3);
    assert_int_equal(v[2], 7);
    assert_int_equal(st_devices_parse("1023", v, ST_DEVICES_MAX, &all, msg, sizeof msg), 1);
    static const struct {
        const char *v, *why;
    } bad[] = {{"", "'' is not a device number"},      {"0,", "'' is not a device number"},
               {",1", "'' is not a device number"},    {"0,0", "device 0 is named twice"},
               {"1024", "'1024' is not a device"},    {"-1", "'-1' is not a device"},
               {"1,x", "'x' is not a device number"}, {"ALL", "'ALL' is not"},
               {"0 ,1", "'0 ' is not"},               {"99999", "'99999' is not"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        msg[0] = '\0';
        if (st_devices_parse(bad[i].v, v, ST_DEVICES_MAX, &all, msg, sizeof msg) != -1 || !strstr(msg, bad[i].why))
            fail_msg("'%s': expected -1 and '%s', got '%s'", bad[i].v, bad[i].why, msg);
    }
    char many[ST_DEVICES_MAX * 4 + 8] = "";
    for (int i = 0; i <= ST_DEVICES_MAX; i++)
        snprintf(many + strlen(many), sizeof many - strlen(many), "%s%d", i ? "," : "", i);
    assert_int_equal(st_devices_parse(many, v, ST_DEVICES_MAX, &all, msg, sizeof msg), -1);
    assert_non_null(strstr(msg, "more than 64 devices"));
}

static void device_count_answers_per_backend(void **state)
{
    (void)state;
    int n = -1;
    assert_int_equal(st_device_count(ST_BACKEND_CPU, &n), ST_OK);
    assert_int_equal(n, 1);
    int gpus = -1;
    assert_int_equal(st_device_count(ST_BACKEND_GPU, &gpus), ST_OK);
    assert_true(gpus >= 0);
    assert_int_equal(st_device_count(ST_BACKEND_AUTO, &n), ST_OK);
    assert_int_equal(n, gpus > 0 ? gpus : 1);
    assert_int_equal(st_device_count((st_backend)42, &n), ST_ERR_INVALID_ARG);
    assert_int_equal(st_device_count(ST_BACKEND_CPU, NULL), ST_ERR_INVALID_ARG);
    st_ctx *c = NULL;
    assert_int_equal(st_ctx_create(ST_BACKEND_CPU, 0, &c), ST_OK);
    assert_int_equal(st_ctx_device(c), 0);
    st_ctx_destroy(c);
}

static int g_hook_calls;

static void count_hook(void *user, int member, int pass_no, bool before)
{
    (void)user;
    (void)member;
    (void)pass_no;
    (void)before;
    g_hook_calls++;
}

/* Two CPU contexts standing for devices 0 and 1 (st_ctx_test_set_device):
 * one identity, so one table; at a 50% threshold neither keeps a variant,
 * so the second pass changes nothing and they agree after two passes, each
 * with its report. A stop flag already set ends the group at its first
 * pass, with nothing written. */
static void two_devices_of_one_model_agree_into_one_table(void **state)
{
    (void)state;
    const char *dir = make_dir();
    st_ctx *ctx[2] = {NULL, NULL};
    for (int k = 0; k < 2; k++) {
        assert_int_equal(st_ctx_create(ST_BACKEND_CPU, 0, &ctx[k]), ST_OK);
        st_ctx_test_set_device(ctx[k], k);
    }
    st_tune_options o;
    st_tune_options_default(&o);
    o.model_path = MODEL;
    o.out_dir = dir;
    o.quick = true;
    o.quiet = true;
    o.threshold = 0.5;
    static const int mix[] = {1, 2};
    o.ntok_mix = mix;
    o.n_ntok_mix = 2;
    st_devices_plan plan;
    st_devices_pass *pass = NULL;
    g_hook_calls = 0;
    const int n = st_devices_run(ctx, 2, &o, &plan, &pass, count_hook, NULL);
    if (n != 2 || st_devices_pass_at(pass, 0)->status != ST_OK || st_devices_pass_at(pass, 1)->status != ST_OK)
        fail_msg("passes %d: %s / %s", n, st_devices_pass_at(pass, 0)->message, n > 1 ? st_devices_pass_at(pass, 1)->message : "-");
    assert_true(plan.agreed);
    assert_int_equal(g_hook_calls, 4);
    assert_int_equal(st_devices_pass_at(pass, 0)->device, 0);
    assert_int_equal(st_devices_pass_at(pass, 1)->device, 1);
    assert_int_equal(st_devices_pass_at(pass, 0)->res.changed_vs_previous, -1); /* it made the table */
    assert_int_equal(st_devices_pass_at(pass, 1)->res.changed_vs_previous, 0);  /* merged into it, nothing changed */
    assert_string_equal(st_devices_pass_at(pass, 0)->res.table_path, st_devices_pass_at(pass, 1)->res.table_path);
    assert_true(st_devices_pass_at(pass, 0)->report && st_devices_pass_at(pass, 1)->report);
    assert_non_null(strstr(st_devices_pass_at(pass, 0)->res.report_path, ".dev0.autotune.json"));
    assert_non_null(strstr(st_devices_pass_at(pass, 1)->res.report_path, ".dev1.autotune.json"));
    assert_true(file_exists(st_devices_pass_at(pass, 0)->res.report_path));
    assert_true(file_exists(st_devices_pass_at(pass, 1)->res.report_path));

    st_devices_passes_free(pass, n);

    volatile int stop = 1;
    o.stop = &stop;
    const char *dir2 = make_dir();
    o.out_dir = dir2;
    const int n2 = st_devices_run(ctx, 2, &o, &plan, &pass, NULL, NULL);
    assert_int_equal(n2, 1);
    assert_int_equal(st_devices_pass_at(pass, 0)->status, ST_ERR_INTERRUPTED);
    assert_false(st_devices_pass_at(pass, 0)->report);
    assert_true(!st_devices_pass_at(pass, 0)->res.table_path || !file_exists(st_devices_pass_at(pass, 0)->res.table_path));
    st_devices_passes_free(pass, n2);
    for (int k = 0; k < 2; k++) st_ctx_destroy(ctx[k]);
}

/* Two CPU contexts that measure the opposite: on "device 0" the default
 * chain takes 5x its time (st_ctx_test_slow_default), so the variants win;
 * on "device 1" the variants do (st_ctx_test_slow_variants), so the default
 * wins. Each pass then changes the other's choices beyond the threshold:
 * after two passes each they disagree. */
static void devices_that_measure_the_opposite_disagree(void **state)
{
    (void)state;
    const char *dir = make_dir();
    st_ctx *ctx[2] = {NULL, NULL};
    for (int k = 0; k < 2; k++) {
        assert_int_equal(st_ctx_create(ST_BACKEND_CPU, 0, &ctx[k]), ST_OK);
        st_ctx_test_set_device(ctx[k], k);
    }
    st_ctx_test_slow_default(ctx[0], 4.0);
    st_ctx_test_slow_variants(ctx[1], 4.0);
    st_tune_options o;
    st_tune_options_default(&o);
    o.model_path = MODEL;
    o.out_dir = dir;
    o.quick = true;
    o.quiet = true;
    o.no_verify = true; /* the plan is what is tested; the gate has its own tests */
    o.do_mmvq = false;  /* the expert shapes: every one has variants */
    /* four shapes, 5x apart: a pass needs one change, on a loaded machine too */
    static const int mix[] = {1, 2, 3, 4};
    o.ntok_mix = mix;
    o.n_ntok_mix = 4;
    st_devices_plan plan;
    st_devices_pass *pass = NULL;
    const int n = st_devices_run(ctx, 2, &o, &plan, &pass, NULL, NULL);
    for (int i = 0; i < n; i++)
        print_message("pass %d (device %d): %s, %d kept a variant, changed %d\n", i + 1, st_devices_pass_at(pass, i)->device,
                      st_status_name(st_devices_pass_at(pass, i)->status), st_devices_pass_at(pass, i)->res.kept_variants, st_devices_pass_at(pass, i)->res.changed_vs_previous);
    if (n != 4) fail_msg("%d passes, expected 4 (last: %s)", n, n ? st_devices_pass_at(pass, n - 1)->message : "-");
    assert_false(plan.agreed);
    assert_true(st_devices_pass_at(pass, 0)->res.kept_variants > 0);
    for (int i = 1; i < 4; i++) {
        assert_int_equal(st_devices_pass_at(pass, i)->status, ST_OK);
        assert_int_equal(st_devices_pass_at(pass, i)->device, i % 2);
        assert_true(st_devices_pass_at(pass, i)->res.changed_vs_previous > 0);
    }
    assert_true(st_devices_pass_at(pass, 1)->res.kept_variants < st_devices_pass_at(pass, 0)->res.kept_variants); /* device 1 put the default back */
    assert_int_equal(plan.changes, st_devices_pass_at(pass, 1)->res.changed_vs_previous + st_devices_pass_at(pass, 2)->res.changed_vs_previous +
                                       st_devices_pass_at(pass, 3)->res.changed_vs_previous);
    st_devices_passes_free(pass, n);
    for (int k = 0; k < 2; k++) st_ctx_destroy(ctx[k]);
}

static void tune_all_devices_on_the_cpu(void **state)
{
    (void)state;
    const char *dir = make_dir();
    char *out = NULL, *err = NULL;
    char *argv[] = {"tune_decode", "--backend", "cpu", "--device", "all", "tune", MODEL, "--quick", "--no-verify",
                    "--out", (char *)dir, NULL};
    int rc = run_cli(argv, &out, &err);
    if (rc != 0) fail_msg("tune --device all: exit %d\n%s\n%s", rc, out, err);
    if (!strstr(out, "device 0: pass 1: 10 shapes") || !strstr(out, "device 0 (") ||
        !strstr(err, "[device 0] tune: [1/10]") || !strstr(err, "tune:   device 0: "))
        fail_msg("tune --device all: the device is not on the lines\n%s\n%s", out, err);
    /* every line the library printed carries the device */
    for (const char *l = err; *l;) {
        const char *e = strchr(l, '\n');
        const size_t len = e ? (size_t)(e - l) : strlen(l);
        /* the run's own opening lines name every device themselves */
        if (len && strncmp(l, "[device 0] ", 11) && strncmp(l, "tune: 1 device, 1 model", 23) &&
            strncmp(l, "tune:   device 0: ", 18))
            fail_msg("a line without its device: %.*s", (int)len, l);
        l = e ? e + 1 : l + len;
    }
    assert_true(file_exists(path_in(dir, "strata-tune-tiny-moe-tests.dev0.autotune.json")));
    assert_true(file_exists(path_in(dir, "strata-tune-tiny-moe-tests.dev0.autotune.html")));
    assert_false(file_exists(path_in(dir, "strata-tune-tiny-moe-tests.autotune.json")));
    char *rep = slurp(path_in(dir, "strata-tune-tiny-moe-tests.dev0.autotune.json"), NULL);
    assert_non_null(strstr(rep, "\"device_index\""));
    free(rep);
    char name[128];
    snprintf(name, sizeof name, "strata-tune-tiny-moe-tests-cpu-%s.table", st_version()); /* the runtime token */
    assert_true(file_exists(path_in(dir, name)));
    free(out);
    free(err);

    /* again with --json: the folder's table is this identity's, so the
     * pass merges into it (its changes count against that earlier table) */
    char *argv2[] = {"tune_decode", "--backend", "cpu", "--device", "0", "--device", "all", "--json", "-q", "tune",
                     MODEL, "--quick", "--no-verify", "--out", (char *)dir, NULL};
    rc = run_cli(argv2, &out, &err);
    if (rc != 0) fail_msg("tune --device all --json: exit %d\n%s\n%s", rc, out, err);
    cJSON *j = cJSON_Parse(out);
    if (!j) fail_msg("not JSON:\n%s", out);
    const cJSON *g = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "groups"), 0);
    assert_non_null(g);
    assert_string_equal(cJSON_GetObjectItem(g, "outcome")->valuestring, "one device");
    const cJSON *p = cJSON_GetArrayItem(cJSON_GetObjectItem(g, "passes"), 0);
    assert_non_null(p);
    assert_int_equal(cJSON_GetObjectItem(p, "device")->valueint, 0);
    assert_true(cJSON_GetObjectItem(p, "changed_vs_previous")->valueint >= 0);
    assert_non_null(strstr(cJSON_GetObjectItem(p, "report")->valuestring, ".dev0.autotune.json"));
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(g, "passes")), 1);
    cJSON_Delete(j);
    free(out);
    free(err);

    /* verify and coverage run per device, after a line naming it */
    char *argv3[] = {"tune_decode", "--backend", "cpu", "--device", "all", "coverage", MODEL, (char *)dir, NULL};
    rc = run_cli(argv3, &out, &err);
    if (rc != 0 || !strstr(out, "== coverage on device 0 (1 of 1)") || !strstr(out, "the table engages here"))
        fail_msg("coverage --device all: exit %d\n%s\n%s", rc, out, err);
    free(out);
    free(err);
}

static void a_refused_pass_names_no_file_it_did_not_write(void **state)
{
    (void)state;
    const char *dir = make_dir();
    char *out = NULL, *err = NULL;
    /* a dispatch knob: the tuner refuses before it measures */
    assert_int_equal(setenv("STRATA_NO_SUB16_GU", "1", 1), 0);
    char *argv[] = {"tune_decode", "--backend", "cpu", "--device", "all", "tune", MODEL, "--quick", "--out",
                    (char *)dir, NULL};
    int rc = run_cli(argv, &out, &err);
    if (rc != 1 || !strstr(out, "device 0: pass 1: 0 shapes, 0 kept a variant, refused: nothing installed") ||
        strstr(out, "report ") || !strstr(out, "stopped at device 0's pass 1 (exit 1): STRATA_NO_SUB16_GU is set") ||
        !strstr(err, "tune: device 0: STRATA_NO_SUB16_GU is set") || strstr(err, "tune: tune:"))
        fail_msg("a refused pass: exit %d\n%s\n%s", rc, out, err);
    free(out);
    free(err);
    char *argv2[] = {"tune_decode", "--backend", "cpu", "--device", "all", "--json", "tune", MODEL, "--quick",
                     "--out", (char *)dir, NULL};
    rc = run_cli(argv2, &out, &err);
    assert_int_equal(unsetenv("STRATA_NO_SUB16_GU"), 0);
    cJSON *j = cJSON_Parse(out);
    if (rc != 1 || !j) fail_msg("a refused pass, --json: exit %d\n%s\n%s", rc, out, err);
    const cJSON *g = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "groups"), 0);
    const cJSON *p = cJSON_GetArrayItem(cJSON_GetObjectItem(g, "passes"), 0);
    assert_non_null(p);
    assert_string_equal(cJSON_GetObjectItem(g, "outcome")->valuestring, "stopped");
    assert_string_equal(cJSON_GetObjectItem(g, "table")->valuestring, "");
    assert_string_equal(cJSON_GetObjectItem(p, "report")->valuestring, "");
    assert_string_equal(cJSON_GetObjectItem(p, "report_html")->valuestring, "");
    assert_true(cJSON_IsFalse(cJSON_GetObjectItem(p, "table_written")));
    assert_int_equal(cJSON_GetObjectItem(j, "exit")->valueint, 1);
    cJSON_Delete(j);
    free(out);
    free(err);
}

static void statuses_of_several_devices_keep_the_one_to_act_on(void **state)
{
    (void)state;
    assert_int_equal(st_devices_worse_exit(3, 1), 1);  /* a failure is not hidden by "cannot decide" */
    assert_int_equal(st_devices_worse_exit(1, 5), 1);  /* nor by a disagreement */
    assert_int_equal(st_devices_worse_exit(5, 4), 4);
    assert_int_equal(st_devices_worse_exit(0, 3), 3);
    assert_int_equal(st_devices_worse_exit(1, 130), 130);
    assert_int_equal(st_devices_worse_exit(0, 0), 0);
}

static void a_list_the_machine_lacks_is_refused_before_anything_is_written(void **state)
{
    (void)state;
    const char *parent = make_dir();
    const char *dir = path_in(parent, "out");
    char *out = NULL, *err = NULL;
    char *argv[] = {"tune_decode", "--backend", "cpu", "--device", "0,1", "tune", MODEL, "--quick", "--out",
                    (char *)dir, NULL};
    int rc = run_cli(argv, &out, &err);
    if (rc != 1 || !strstr(err, "--device 1: the CPU backend is one device, 0"))
        fail_msg("--device 0,1 on the CPU: exit %d\n%s\n%s", rc, out, err);
    assert_false(file_exists(dir));
    free(out);
    free(err);
    /* a malformed list is a usage error naming it */
    char *argv2[] = {"tune_decode", "--device", "0,,1", "tune", NULL};
    rc = run_cli(argv2, &out, &err);
    if (rc != 2 || !strstr(err, "--device '0,,1': '' is not a device number"))
        fail_msg("--device 0,,1: exit %d\n%s\n%s", rc, out, err);
    free(out);
    free(err);
    /* commands that take one device say so */
    char *argv3[] = {"tune_decode", "--device", "all", "bench", "--quick", NULL};
    rc = run_cli(argv3, &out, &err);
    if (rc != 2 || !strstr(err, "bench takes one device"))
        fail_msg("bench --device all: exit %d\n%s\n%s", rc, out, err);
    free(out);
    free(err);
    char *argv5[] = {"tune_decode", "--device", "all", "verify", MODEL, (char *)dir, "--html", "/tmp/x.html", NULL};
    rc = run_cli(argv5, &out, &err);
    if (rc != 2 || !strstr(err, "verify --html writes one page for one device"))
        fail_msg("verify --html --device all: exit %d\n%s\n%s", rc, out, err);
    free(out);
    free(err);
    char *argv4[] = {"tune_decode", "--device", "all", "--json", "verify", MODEL, (char *)dir, NULL};
    rc = run_cli(argv4, &out, &err);
    if (rc != 2 || !strstr(err, "verify --json prints one document for one device"))
        fail_msg("verify --json --device all: exit %d\n%s\n%s", rc, out, err);
    free(out);
    free(err);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(plan_one_device_is_one_pass),
        cmocka_unit_test(plan_devices_that_change_nothing_agree_in_one_round),
        cmocka_unit_test(plan_a_change_is_confirmed_by_every_other_device),
        cmocka_unit_test(plan_a_disagreement_ends_after_two_passes_per_device),
        cmocka_unit_test(devices_of_one_model_share_a_group),
        cmocka_unit_test(device_lists_parse_or_say_why),
        cmocka_unit_test(device_count_answers_per_backend),
        cmocka_unit_test(two_devices_of_one_model_agree_into_one_table),
        cmocka_unit_test(devices_that_measure_the_opposite_disagree),
        cmocka_unit_test(tune_all_devices_on_the_cpu),
        cmocka_unit_test(a_refused_pass_names_no_file_it_did_not_write),
        cmocka_unit_test(statuses_of_several_devices_keep_the_one_to_act_on),
        cmocka_unit_test(a_list_the_machine_lacks_is_refused_before_anything_is_written),
    };
    const int rc = cmocka_run_group_tests(tests, NULL, teardown_dirs);
    return rc;
}
