/* tune_decode vectors FILE...: checks STQV reference-vector files against the
 * library's dequantizers, its q8_1 quantizer and the CPU reference MMVQ. */
#include "commands.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The dot check's tolerance; see VECTORS_HELP for the definition. */
#define VEC_DOT_REL_TOL 1e-4
#define VEC_DOT_TINY 1e-30
/* st_ref_mmvq takes at most this many tokens per call. */
#define VEC_MAX_NT ST_MAX_TOKENS

static const char VECTORS_HELP[] =
    "usage: tune_decode [-q] [--json] vectors FILE...\n"
    "\n"
    "Checks STQV reference-vector files (this repository ships some: tests/data/vectors/*.stqv).\n"
    "For each file, one line per check, PASS or FAIL:\n"
    "  dequantize (W_DEQ)   every row of W_QUANT through st_dequantize_row; all M*K floats must\n"
    "                       have the bits of W_DEQ\n"
    "  q8_1 (X_Q8_1)        every token of X_F32 through st_quantize_q8_1; all bytes must equal\n"
    "                       X_Q8_1\n"
    "  dot (Y_Q8_1_F64)     y = st_ref_mmvq(W_QUANT, our q8_1 of X_F32) against Y_Q8_1_F64, with\n"
    "                       rel err = |y[t][m] - Y_Q8_1_F64[t][m]| / max(sum_k |W_DEQ[m][k] * xq_k|, 1e-30)\n"
    "                       where xq_k = f16tof32(d of k's q8_1 block) * q_k: the error relative to\n"
    "                       the row's absolute dot magnitude. Passes when the largest over all\n"
    "                       t, m is <= 1e-4.\n"
    "  finite               every value of the float sections is finite (a NaN or an infinity fails\n"
    "                       the file: it would compare false with any tolerance)\n"
    "A file that cannot be read or is not a valid STQV file gives one line\n"
    "'vectors: FILE: reason' and counts as a failed check.\n"
    "Last line: 'vectors: N checks passed, M failed' (on stderr with --json).\n"
    "\n"
    "Options:\n"
    "  -q, --quiet   print only the FAIL lines and the summary\n"
    "  --json        print a JSON array of {file, type, M, K, T, section, check, pass, detail}\n"
    "                (section: STQV section name, or \"file\" when the file is unreadable)\n"
    "  -h, --help    this text\n"
    "Exit status: 0 every check passed, 1 any check failed, 2 usage error.\n";

typedef struct {
    const td_global *g;
    cJSON *json; /* array, or NULL in text mode */
    int passed, failed;
} vec_run;

/* One check's outcome: a text line or a JSON object. S is NULL when the file
 * could not be opened. */
static void report(vec_run *r, const char *file, const st_stqv *s, const char *check, const char *section, bool pass,
                   const char *fmt, ...) ST_PRINTF(7, 8);

static void report(vec_run *r, const char *file, const st_stqv *s, const char *check, const char *section, bool pass,
                   const char *fmt, ...)
{
    char detail[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    if (pass)
        r->passed++;
    else
        r->failed++;
    if (r->json) {
        cJSON *o = cJSON_CreateObject();
        if (!o) return;
        td_json_add_string(o, "file", file);
        if (s) {
            cJSON_AddStringToObject(o, "type", st_qtype_name(s->type));
            cJSON_AddNumberToObject(o, "M", s->m);
            cJSON_AddNumberToObject(o, "K", s->k);
            cJSON_AddNumberToObject(o, "T", s->t);
        } else {
            cJSON_AddNullToObject(o, "type");
            cJSON_AddNullToObject(o, "M");
            cJSON_AddNullToObject(o, "K");
            cJSON_AddNullToObject(o, "T");
        }
        cJSON_AddStringToObject(o, "section", section);
        cJSON_AddStringToObject(o, "check", check);
        cJSON_AddBoolToObject(o, "pass", pass);
        td_json_add_string(o, "detail", detail);
        cJSON_AddItemToArray(r->json, o);
        return;
    }
    if (!s) {
        td_print("vectors: %s: %s", file, detail);
        return;
    }
    if (pass && r->g->quiet) return;
    printf("%s %s M%u K%u T%u %s (%s): %s\n", pass ? "PASS" : "FAIL", st_qtype_name(s->type), s->m, s->k, s->t, check,
           section, detail);
}

static uint32_t f2u(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static void check_dequantize(vec_run *r, const char *file, const st_stqv *s)
{
    const uint8_t *wq = st_stqv_section_data(s, ST_STQV_W_QUANT, NULL);
    const float *wd = st_stqv_section_data(s, ST_STQV_W_DEQ, NULL);
    float *row = malloc((size_t)s->k * sizeof *row);
    if (!row) {
        report(r, file, s, "dequantize", "W_DEQ", false, "out of memory");
        return;
    }
    uint64_t same = 0, total = (uint64_t)s->m * s->k;
    int64_t first = -1;
    for (uint32_t m = 0; m < s->m; m++) {
        if (st_dequantize_row(s->type, wq + (size_t)m * s->row_bytes, row, s->k) != ST_OK) {
            report(r, file, s, "dequantize", "W_DEQ", false, "st_dequantize_row failed: %s", st_last_error());
            free(row);
            return;
        }
        for (uint32_t k = 0; k < s->k; k++) {
            bool eq = f2u(row[k]) == f2u(wd[(size_t)m * s->k + k]);
            same += eq;
            if (!eq && first < 0) first = (int64_t)m * s->k + k;
        }
    }
    if (first < 0) {
        report(r, file, s, "dequantize", "W_DEQ", true, "%llu/%llu floats bit-exact", (unsigned long long)same,
               (unsigned long long)total);
    } else {
        uint32_t m = (uint32_t)(first / s->k), k = (uint32_t)(first % s->k);
        float got;
        st_dequantize_row(s->type, wq + (size_t)m * s->row_bytes, row, s->k);
        got = row[k];
        report(r, file, s, "dequantize", "W_DEQ", false,
               "%llu/%llu floats bit-exact; first difference at row %u col %u: 0x%08x (%.9g), expected 0x%08x (%.9g)",
               (unsigned long long)same, (unsigned long long)total, m, k, f2u(got), got,
               f2u(wd[(size_t)first]), wd[(size_t)first]);
    }
    free(row);
}

/* Our q8_1 of X_F32 into XQ ([T][K/32] blocks); reports the byte check. */
static bool check_q8_1(vec_run *r, const char *file, const st_stqv *s, uint8_t *xq)
{
    const float *x = st_stqv_section_data(s, ST_STQV_X_F32, NULL);
    size_t n;
    const uint8_t *want = st_stqv_section_data(s, ST_STQV_X_Q8_1, &n);
    size_t token_bytes = (size_t)s->k / ST_Q8_1_QK * ST_Q8_1_BLOCK_BYTES;
    for (uint32_t t = 0; t < s->t; t++) {
        if (st_quantize_q8_1(x + (size_t)t * s->k, xq + t * token_bytes, s->k) != ST_OK) {
            report(r, file, s, "q8_1", "X_Q8_1", false, "st_quantize_q8_1 failed: %s", st_last_error());
            return false;
        }
    }
    size_t same = 0, first = SIZE_MAX;
    for (size_t i = 0; i < n; i++) {
        if (xq[i] == want[i])
            same++;
        else if (first == SIZE_MAX)
            first = i;
    }
    if (first == SIZE_MAX) {
        report(r, file, s, "q8_1", "X_Q8_1", true, "%zu/%zu bytes exact", same, n);
    } else {
        size_t blk = first / ST_Q8_1_BLOCK_BYTES, off = first % ST_Q8_1_BLOCK_BYTES;
        size_t per_token = (size_t)s->k / ST_Q8_1_QK;
        report(r, file, s, "q8_1", "X_Q8_1", false,
               "%zu/%zu bytes exact; first difference in token %zu block %zu byte %zu (%s): 0x%02x, expected 0x%02x",
               same, n, blk / per_token, blk % per_token, off, off < 2 ? "d" : off < 4 ? "s" : "qs", xq[first],
               want[first]);
    }
    return true;
}

static void check_dot(vec_run *r, const char *file, const st_stqv *s, const uint8_t *xq)
{
    const void *wq = st_stqv_section_data(s, ST_STQV_W_QUANT, NULL);
    const float *wd = st_stqv_section_data(s, ST_STQV_W_DEQ, NULL);
    const double *want = st_stqv_section_data(s, ST_STQV_Y_Q8_1_F64, NULL);
    size_t token_bytes = (size_t)s->k / ST_Q8_1_QK * ST_Q8_1_BLOCK_BYTES;
    float *y = malloc((size_t)s->t * s->m * sizeof *y);
    float *xf = malloc((size_t)s->k * sizeof *xf);
    if (!y || !xf) {
        report(r, file, s, "dot", "Y_Q8_1_F64", false, "out of memory");
        goto out;
    }
    for (uint32_t t0 = 0; t0 < s->t; t0 += VEC_MAX_NT) {
        int nt = (int)(s->t - t0 < VEC_MAX_NT ? s->t - t0 : VEC_MAX_NT);
        if (st_ref_mmvq(s->type, wq, s->m, s->k, xq + t0 * token_bytes, nt, y + (size_t)t0 * s->m, NULL) != ST_OK) {
            report(r, file, s, "dot", "Y_Q8_1_F64", false, "st_ref_mmvq failed: %s", st_last_error());
            goto out;
        }
    }
    double worst = 0.0;
    uint32_t wt = 0, wm = 0;
    for (uint32_t t = 0; t < s->t; t++) {
        const uint8_t *xt = xq + t * token_bytes;
        /* The activations as the dot sees them: f16 d times q, in f32. */
        for (uint32_t k = 0; k < s->k; k++) {
            const uint8_t *b = xt + (size_t)(k / ST_Q8_1_QK) * ST_Q8_1_BLOCK_BYTES;
            float d = st_f16_to_f32((uint16_t)(b[0] | (b[1] << 8)));
            xf[k] = d * (float)(int8_t)b[4 + k % ST_Q8_1_QK];
        }
        for (uint32_t m = 0; m < s->m; m++) {
            double mag = 0.0;
            const float *w = wd + (size_t)m * s->k;
            for (uint32_t k = 0; k < s->k; k++) mag += fabs((double)w[k] * (double)xf[k]);
            double err = fabs((double)y[(size_t)t * s->m + m] - want[(size_t)t * s->m + m]) /
                         (mag > VEC_DOT_TINY ? mag : VEC_DOT_TINY);
            if (!isnan(worst) && !(err <= worst)) { /* NaN counts as worst, and stays */
                worst = err;
                wt = t;
                wm = m;
            }
        }
    }
    bool pass = worst <= VEC_DOT_REL_TOL;
    if (pass)
        report(r, file, s, "dot", "Y_Q8_1_F64", true, "max rel err %.1e <= %.0e", worst, VEC_DOT_REL_TOL);
    else
        report(r, file, s, "dot", "Y_Q8_1_F64", false, "max rel err %.1e > %.0e (token %u row %u: %.9g, expected %.17g)",
               worst, VEC_DOT_REL_TOL, wt, wm, y[(size_t)wt * s->m + wm], want[(size_t)wt * s->m + wm]);
out:
    free(y);
    free(xf);
}

/* Every value of the float sections is finite: a NaN compares false with
 * any tolerance, so a reference holding one would pass the checks below by
 * accident. Reports one line; false when a value is not finite. */
static bool check_finite(vec_run *r, const char *file, const st_stqv *s)
{
    static const struct {
        int sec;
        bool f64;
    } secs[] = {{ST_STQV_W_F32, false},     {ST_STQV_W_DEQ, false},     {ST_STQV_X_F32, false},
                {ST_STQV_Y_DEQ_F64, true},  {ST_STQV_Y_Q8_1_F64, true}, {ST_STQV_Y_CPU_F32, false},
                {ST_STQV_ROW_SCALE_F32, false}};
    size_t checked = 0;
    for (size_t i = 0; i < sizeof secs / sizeof secs[0]; i++) {
        size_t n = 0;
        const void *p = st_stqv_section_data(s, secs[i].sec, &n);
        if (!p) continue;
        const size_t count = n / (secs[i].f64 ? sizeof(double) : sizeof(float));
        for (size_t k = 0; k < count; k++) {
            const double v = secs[i].f64 ? ((const double *)p)[k] : (double)((const float *)p)[k];
            if (!isfinite(v)) {
                report(r, file, s, "finite", st_stqv_section_name(secs[i].sec), false,
                       "value %zu is %s: a reference must hold finite numbers", k, isnan(v) ? "NaN" : "infinite");
                return false;
            }
        }
        checked += count;
    }
    report(r, file, s, "finite", "all", true, "%zu values finite", checked);
    return true;
}

static void check_file(vec_run *r, const char *file)
{
    st_stqv *s = NULL;
    if (st_stqv_open(file, &s) != ST_OK) {
        report(r, file, NULL, "open", "file", false, "%s", st_last_error());
        return;
    }
    if (!check_finite(r, file, s)) {
        st_stqv_close(s);
        return;
    }
    check_dequantize(r, file, s);
    uint8_t *xq = malloc((size_t)s->t * s->k / ST_Q8_1_QK * ST_Q8_1_BLOCK_BYTES);
    if (!xq) {
        report(r, file, s, "q8_1", "X_Q8_1", false, "out of memory");
    } else if (check_q8_1(r, file, s, xq)) {
        check_dot(r, file, s, xq);
    }
    free(xq);
    st_stqv_close(s);
}

/* Options come anywhere; "--" ends them. Returns the number of files, or
 * -1 after a usage error (message printed), -2 for --help. */
static int scan_args(int argc, char **argv, bool run, vec_run *r)
{
    int files = 0;
    bool dashes = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!dashes && !strcmp(a, "--")) {
            dashes = true;
            continue;
        }
        if (!dashes && (!strcmp(a, "-h") || !strcmp(a, "--help"))) return -2;
        if (!dashes && a[0] == '-' && a[1] != '\0') {
            td_usage_error("vectors: unknown option '%s'", a);
            return -1;
        }
        files++;
        if (run) check_file(r, a);
    }
    return files;
}

int cmd_vectors(int argc, char **argv, const td_global *g)
{
    int files = scan_args(argc, argv, false, NULL);
    if (files == -2) {
        fputs(VECTORS_HELP, stdout);
        return 0;
    }
    if (files < 0) return 2;
    if (files == 0) return td_usage_error("vectors: no FILE given (vectors FILE...)");

    vec_run r = {g, NULL, 0, 0};
    if (g->json && !(r.json = cJSON_CreateArray())) {
        fputs("vectors: out of memory\n", stderr);
        return 1;
    }
    scan_args(argc, argv, true, &r);
    if (r.json) {
        char *text = cJSON_Print(r.json);
        if (text) {
            fputs(text, stdout);
            fputc('\n', stdout);
            cJSON_free(text);
        } else {
            fputs("vectors: out of memory\n", stderr);
            r.failed++;
        }
        cJSON_Delete(r.json);
    }
    fprintf(r.json ? stderr : stdout, "vectors: %d checks passed, %d failed\n", r.passed, r.failed);
    return r.failed ? 1 : 0;
}
