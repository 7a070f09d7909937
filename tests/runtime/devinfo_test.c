/* What the library knows about devices beyond their runtime: the per-arch
 * last-level cache table (gfx1100's Infinity Cache by SKU name or compute
 * units; the runtime's L2 elsewhere), the rotation that must cover 4x it
 * (a fake 96 MB cache: the planner, and the tuner end to end on the CPU
 * backend), and the build's arch check (a device the build has no code
 * for is refused in one line, and the auto backend then uses the CPU). */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "ctx_internal.h"
#include "devinfo.h"
#include "measure.h"
#include "strata/decode.h"
#include "strata/knobs.h"
#include "strata/tools/tuner.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MB ((size_t)1 << 20)

static size_t llc(const char *arch, const char *name, int cus, size_t reported, const char **src)
{
    return st_llc_lookup(arch, name, cus, reported, src);
}

static void llc_table_knows_the_infinity_cache(void **state)
{
    (void)state;
    const char *src = NULL;
    /* HIP reports the 6 MB L2 of Navi 31; the last level is the Infinity Cache */
    assert_int_equal(llc("gfx1100", "AMD Radeon RX 7900 XTX", 96, 6 * MB, &src), 96 * MB);
    assert_non_null(strstr(src, "7900 XTX: 96 MB Infinity Cache"));
    assert_int_equal(llc("gfx1100", "AMD Radeon PRO W7900", 96, 6 * MB, &src), 96 * MB);
    assert_int_equal(llc("gfx1100", "AMD Radeon RX 7900 XT", 84, 6 * MB, &src), 80 * MB);
    assert_non_null(strstr(src, "7900 XT: 80 MB"));
    assert_int_equal(llc("gfx1100", "AMD Radeon RX 7900 GRE", 80, 6 * MB, &src), 64 * MB);
    /* by compute units when the name says nothing */
    assert_int_equal(llc("gfx1100", "Device 744c", 96, 6 * MB, &src), 96 * MB);
    assert_int_equal(llc("gfx1100", "", 84, 6 * MB, &src), 80 * MB);
    assert_int_equal(llc("gfx1100", NULL, 80, 0, &src), 64 * MB);
    /* an unknown SKU of the arch gets the largest, with a reason */
    assert_int_equal(llc("gfx1100", "Device 7448", 48, 6 * MB, &src), 96 * MB);
    assert_non_null(strstr(src, "unknown SKU"));
    /* feature suffixes do not hide the arch */
    assert_int_equal(llc("gfx1100:xnack-", "AMD Radeon RX 7900 XTX", 96, 6 * MB, &src), 96 * MB);
    /* NVIDIA: the L2 as reported */
    assert_int_equal(llc("sm_90", "NVIDIA H200", 132, 60 * MB, &src), 60 * MB);
    assert_non_null(strstr(src, "as the runtime reports"));
    assert_int_equal(llc("sm_90", "NVIDIA H100 80GB HBM3", 132, 50 * MB, &src), 50 * MB);
    /* a larger reported figure wins over the table */
    assert_int_equal(llc("gfx1100", "AMD Radeon RX 7900 XTX", 96, 200 * MB, &src), 200 * MB);
    assert_int_equal(llc("gfx9999", "x", 1, 0, &src), 0);
    assert_non_null(strstr(src, "unknown"));
}

static void rotation_covers_four_times_a_fake_96_mb_cache(void **state)
{
    (void)state;
    bool short_of_rule = true;
    /* a small matrix (28 KiB) and --quick's floor: the cache rule decides */
    const size_t one = 28160, cache = 96 * MB;
    int c = st_rotation_copies(one, cache, 64 * MB, 1, &short_of_rule);
    assert_true((size_t)c * one >= 4 * cache);
    assert_false(short_of_rule);
    /* no cache figure: the floor */
    c = st_rotation_copies(one, 0, 64 * MB, 1, &short_of_rule);
    assert_true((size_t)c * one >= 64 * MB && (size_t)c * one < 64 * MB + one);
    /* a matrix larger than the rule: at least MIN_COPIES */
    c = st_rotation_copies(512 * MB, cache, 64 * MB, 2, &short_of_rule);
    assert_int_equal(c, 2);
    /* tiny matrices hit the copy cap and say so */
    c = st_rotation_copies(64, cache, 0, 1, &short_of_rule);
    assert_int_equal(c, ST_ROTATION_MAX_COPIES);
    assert_true(short_of_rule);
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) n = 0;
    if (b) b[n] = '\0';
    fclose(f);
    return b;
}

static void the_tuner_rotates_past_a_fake_96_mb_cache(void **state)
{
    (void)state;
    st_ctx *ctx = NULL;
    assert_int_equal(st_ctx_create(ST_BACKEND_CPU, 0, &ctx), ST_OK);
    st_ctx_test_set_llc(ctx, 96 * MB);
    char dir[] = "/tmp/strata-llc.XXXXXX";
    assert_non_null(mkdtemp(dir));
    static const char *shapes[] = {"mmvq iq3_s 256 256"};
    st_tune_options o;
    st_tune_options_default(&o);
    o.out_dir = dir;
    o.quick = true;
    o.quiet = true;
    o.no_verify = true;
    o.shapes = shapes;
    o.n_shapes = 1;
    static const int one[] = {1};
    o.n_ntok_mix = 1;
    o.ntok_mix = one;
    st_tune_result res __attribute__((cleanup(st_tune_result_clear)));
    st_tune_result_init(&res);
    assert_int_equal(st_tune_run(ctx, &o, &res), ST_OK);
    char *text = slurp(res.report_path);
    assert_non_null(text);
    cJSON *root = cJSON_Parse(text);
    free(text);
    assert_non_null(root);
    const cJSON *cache = cJSON_GetObjectItem(root, "cache");
    assert_true(cJSON_GetObjectItem(cache, "llc_bytes")->valuedouble == (double)(96 * MB));
    assert_non_null(strstr(cJSON_GetObjectItem(cache, "llc_source")->valuestring, "test"));
    const cJSON *sh = cJSON_GetArrayItem(cJSON_GetObjectItem(root, "shapes"), 0);
    const double rot = cJSON_GetObjectItem(sh, "rotation_bytes")->valuedouble;
    const int copies = cJSON_GetObjectItem(sh, "weight_copies")->valueint;
    print_message("mmvq iq3_s 256x256, --quick, fake 96 MB last-level cache: %d copies, %.1f MB rotated\n", copies,
                  rot / (double)MB);
    assert_true(rot >= 4.0 * 96 * MB);
    assert_true(copies > 1000);
    assert_false(cJSON_IsTrue(cJSON_GetObjectItem(sh, "rotation_below_4x_llc")));
    /* what decided is recorded: the mix, the rounds, every knob, the
     * device, the memory check */
    const cJSON *op = cJSON_GetObjectItem(root, "options");
    const cJSON *mix = cJSON_GetObjectItem(op, "ntok_mix");
    assert_int_equal(cJSON_GetArraySize(mix), 1);
    assert_int_equal(cJSON_GetArrayItem(mix, 0)->valueint, 1);
    assert_int_equal(cJSON_GetObjectItem(op, "rounds")->valueint, 9); /* --quick */
    const cJSON *kn = cJSON_GetObjectItem(op, "knobs");
    assert_int_equal(cJSON_GetArraySize(kn), ST_KNOB_COUNT);
    for (const cJSON *k = kn->child; k; k = k->next) assert_true(cJSON_IsFalse(k));
    const cJSON *idj = cJSON_GetObjectItem(root, "identity");
    assert_int_equal(cJSON_GetObjectItem(idj, "device_index")->valueint, -1); /* the CPU backend */
    assert_string_equal(cJSON_GetObjectItem(idj, "device_model")->valuestring, "");
    const cJSON *mem = cJSON_GetObjectItem(root, "memory");
    assert_true(cJSON_GetObjectItem(mem, "needed_bytes")->valuedouble >= 4.0 * 96 * MB);
    assert_true(cJSON_GetObjectItem(mem, "free_bytes")->valuedouble > 0);
    assert_non_null(cJSON_GetObjectItem(root, "gate"));
    cJSON_Delete(root);
    unlink(res.report_path);
    unlink(res.table_path);
    rmdir(dir);
    st_ctx_destroy(ctx);
}

static void a_build_runs_only_the_archs_it_has_code_for(void **state)
{
    (void)state;
    /* HIP: code objects are per arch */
    assert_true(st_arch_built_for("gfx1100", "gfx1100"));
    assert_true(st_arch_built_for("gfx1101", "gfx1100,gfx1101"));
    assert_true(st_arch_built_for("gfx1101", "gfx1100;gfx1101"));
    assert_true(st_arch_built_for("gfx90a", "gfx90a:xnack+"));
    assert_false(st_arch_built_for("gfx1101", "gfx1100"));
    assert_false(st_arch_built_for("gfx110", "gfx1100"));
    assert_false(st_arch_built_for("gfx1100", ""));
    assert_false(st_arch_built_for("", "gfx1100"));
    /* CUDA: SASS within a major, PTX upwards */
    assert_true(st_arch_built_for("sm_90", "90"));
    assert_true(st_arch_built_for("sm_90", "90-real"));
    assert_true(st_arch_built_for("sm_89", "86-real"));
    assert_false(st_arch_built_for("sm_80", "90"));
    assert_false(st_arch_built_for("sm_100", "90-real"));
    assert_true(st_arch_built_for("sm_100", "90"));
    assert_true(st_arch_built_for("sm_100", "90-virtual"));
    assert_true(st_arch_built_for("sm_75", "all"));
    char line[512];
    st_arch_refusal(line, sizeof line, 0, "gfx1101", "AMD Radeon RX 7800 XT", "gfx1100", "hip");
    assert_string_equal(line, "GPU 0 (AMD Radeon RX 7800 XT) is gfx1101, and this build carries GPU code for gfx1100 only: "
                              "rebuild with -DSTRATA_HIP_ARCHS listing gfx1101");
    st_arch_refusal(line, sizeof line, 1, "sm_80", "NVIDIA A100", "90", "cuda");
    assert_non_null(strstr(line, "is sm_80, and this build carries GPU code for 90 only"));
    assert_non_null(strstr(line, "CMAKE_CUDA_ARCHITECTURES"));
    assert_null(strchr(line, '\n'));
}

static void the_auto_backend_falls_back_to_the_cpu(void **state)
{
    (void)state;
    /* this build has no GPU code at all (or no device): auto gives the CPU,
     * gpu gives one line */
    st_ctx *ctx = NULL;
    assert_int_equal(st_ctx_create(ST_BACKEND_AUTO, 0, &ctx), ST_OK);
    if (st_ctx_backend(ctx) == ST_BACKEND_GPU) {
        st_ctx_destroy(ctx);
        skip();
    }
    assert_string_equal(st_ctx_identity(ctx)->arch, "cpu");
    st_ctx_destroy(ctx);
    ctx = NULL;
    assert_int_not_equal(st_ctx_create(ST_BACKEND_GPU, 0, &ctx), ST_OK);
    assert_null(ctx);
    assert_null(strchr(st_last_error(), '\n'));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(llc_table_knows_the_infinity_cache),
        cmocka_unit_test(rotation_covers_four_times_a_fake_96_mb_cache),
        cmocka_unit_test(the_tuner_rotates_past_a_fake_96_mb_cache),
        cmocka_unit_test(a_build_runs_only_the_archs_it_has_code_for),
        cmocka_unit_test(the_auto_backend_falls_back_to_the_cpu),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
