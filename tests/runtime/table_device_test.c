/* Several SKUs of one arch (a 7900 XTX, a 7900 XT and a W7900 are all
 * gfx1100): the device model in the identity, the table's device line that
 * the loader checks (with its own refusal lines), the file a directory
 * picks, and the tuned-default records the runtime counts apart from gaps.
 * The four-token header and its messages stay as they were. */
#include "table_test_util.h"

#include "strata/identity.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

static st_identity gpu_id(const char *name, int cus)
{
    st_identity id;
    st_identity_cpu(&id);
    snprintf(id.arch, sizeof id.arch, "gfx1100");
    snprintf(id.runtime, sizeof id.runtime, "60342134");
    snprintf(id.device_name, sizeof id.device_name, "%s", name);
    id.compute_units = cus;
    st_identity_set_model(&id);
    return id;
}

static void device_model_names_the_sku(void **state)
{
    (void)state;
    st_identity xtx = gpu_id("AMD Radeon RX 7900 XTX", 96), xt = gpu_id("AMD Radeon RX 7900 XT", 84);
    st_identity w = gpu_id("AMD Radeon PRO W7900", 96), none = gpu_id("", 96);
    assert_string_equal(xtx.model, "amd-radeon-rx-7900-xtx-96cu");
    assert_string_equal(xt.model, "amd-radeon-rx-7900-xt-84cu");
    assert_string_equal(w.model, "amd-radeon-pro-w7900-96cu");
    assert_string_equal(none.model, "gpu-96cu");
    /* same four header tokens, different devices */
    assert_true(st_identity_matches(&xtx, &xt));
    assert_false(st_identity_same_device(&xtx, &xt));
    assert_false(st_identity_same_device(&xtx, &w));
    assert_true(st_identity_same_device(&xtx, &xtx));
    /* a long name is cut, the compute units stay */
    st_identity l = gpu_id("A Very Long Device Name That Goes On And On Beyond Any Token Length", 132);
    assert_true(strlen(l.model) < ST_TOKEN_MAX);
    const size_t n = strlen(l.model);
    assert_string_equal(l.model + n - 6, "-132cu");
    /* the header keeps its four tokens */
    char hdr[256];
    st_identity_header(&xtx, hdr, sizeof hdr);
    int spaces = 0;
    for (const char *p = hdr; *p; p++) spaces += *p == ' ';
    assert_int_equal(spaces, 3);
}

static st_status parse_for(const st_identity *id, const char *text, st_table **t, char *msg)
{
    st_dispatch_config cfg;
    st_dispatch_config_default(&cfg);
    return st_table_parse(text, strlen(text), PATH, id, &cfg, t, msg, MSG);
}

static void refuse_for(const st_identity *id, const char *text, st_status want, const char *tail)
{
    char msg[MSG], expected[MSG + 64];
    st_table *t = NULL;
    assert_int_equal(parse_for(id, text, &t, msg), want);
    assert_null(t);
    snprintf(expected, sizeof expected, "decode tuning: %s: %s", PATH, tail);
    assert_string_equal(msg, expected);
}

static void a_table_engages_only_on_its_device(void **state)
{
    (void)state;
    st_identity xtx = gpu_id("AMD Radeon RX 7900 XTX", 96), xt = gpu_id("AMD Radeon RX 7900 XT", 84);
    char hdr[256], text[1024], msg[MSG];
    st_identity_header(&xtx, hdr, sizeof hdr);
    snprintf(text, sizeof text, "%s\n# made on an XTX\ndevice %s\nmmvq iq3_s 256 256 4\n", hdr, xtx.model);
    st_table *t = NULL;
    assert_int_equal(parse_for(&xtx, text, &t, msg), ST_OK);
    assert_non_null(t);
    assert_string_equal(st_table_identity(t)->model, xtx.model);
    assert_int_equal(st_table_count(t), 1);
    st_table_destroy(t);
    refuse_for(&xt, text, ST_ERR_REFUSED,
               "made for device amd-radeon-rx-7900-xtx-96cu, this device is amd-radeon-rx-7900-xt-84cu: run the tuner on "
               "this device");
    /* no device line: made by hand or before SKUs were told apart */
    snprintf(text, sizeof text, "%s\nmmvq iq3_s 256 256 4\n", hdr);
    refuse_for(&xtx, text, ST_ERR_REFUSED,
               "names no device model, this device is amd-radeon-rx-7900-xtx-96cu: run the tuner on this device");
    /* the CPU backend's tables name none, and refuse one that does */
    char msg2[MSG];
    snprintf(text, sizeof text, "%s\ndevice %s\n", g_hdr, xtx.model);
    assert_int_equal(parse_for(&g_id, text, &t, msg2), ST_ERR_REFUSED);
    assert_null(t);
    assert_non_null(strstr(msg2, "made for device amd-radeon-rx-7900-xtx-96cu, this device is the CPU reference"));
    /* the earlier checks come first and keep their words */
    snprintf(text, sizeof text, "gfx1030 60342134 %s %d\ndevice amd-radeon-rx-6900-xt-80cu\n", xtx.compiler, xtx.space);
    refuse_for(&xtx, text, ST_ERR_REFUSED, "made for gfx1030, this device is gfx1100: run the tuner on this device");
}

static void the_device_line_is_checked_for_form_and_place(void **state)
{
    (void)state;
    st_identity xtx = gpu_id("AMD Radeon RX 7900 XTX", 96);
    char hdr[256], text[1024];
    st_identity_header(&xtx, hdr, sizeof hdr);
    snprintf(text, sizeof text, "%s\ndevice %s\nmmvq iq3_s 256 256 4\ndevice %s\n", hdr, xtx.model, xtx.model);
    refuse_for(&xtx, text, ST_ERR_PARSE, "line 4: the device line must directly follow the header");
    snprintf(text, sizeof text, "%s\ndevice a b\n", hdr);
    refuse_for(&xtx, text, ST_ERR_PARSE, "line 2: expected 2 tokens for the device line (device <model>), found 3");
}

static void a_table_written_with_a_model_reads_back(void **state)
{
    (void)state;
    st_identity xtx = gpu_id("AMD Radeon RX 7900 XTX", 96);
    st_table *t = NULL;
    assert_int_equal(st_table_create(&xtx, &t), ST_OK);
    st_mmvq_key k = {ST_IQ3_S, 256, 256};
    assert_int_equal(st_table_add_mmvq(t, &k, 8), ST_OK);
    char *text = NULL;
    size_t len = 0;
    assert_int_equal(st_table_format(t, &text, &len), ST_OK);
    st_table_destroy(t);
    char hdr[256], want[512];
    st_identity_header(&xtx, hdr, sizeof hdr);
    snprintf(want, sizeof want, "%s\ndevice %s\nmmvq iq3_s 256 256 8\n", hdr, xtx.model);
    assert_string_equal(text, want);
    char msg[MSG];
    assert_int_equal(parse_for(&xtx, text, &t, msg), ST_OK);
    st_table_destroy(t);
    free(text);
}

static void write_file(const char *dir, const char *name, const char *text)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fputs(text, f);
    assert_int_equal(fclose(f), 0);
}

static void a_fleet_directory_picks_the_table_of_this_sku(void **state)
{
    (void)state;
    st_identity xtx = gpu_id("AMD Radeon RX 7900 XTX", 96), xt = gpu_id("AMD Radeon RX 7900 XT", 84);
    st_identity gre = gpu_id("AMD Radeon RX 7900 GRE", 80);
    char dir[] = "/tmp/strata-fleet.XXXXXX";
    assert_non_null(mkdtemp(dir));
    char hdr[256], text[512];
    st_identity_header(&xtx, hdr, sizeof hdr);
    snprintf(text, sizeof text, "%s\ndevice %s\nmmvq iq3_s 256 256 4\n", hdr, xtx.model);
    write_file(dir, "xtx.table", text);
    snprintf(text, sizeof text, "%s\ndevice %s\nmmvq iq3_s 256 256 8\nmmvq q8_0 512 256 2\n", hdr, xt.model);
    write_file(dir, "xt.table", text);
    st_dispatch_config cfg;
    st_dispatch_config_default(&cfg);
    char msg[MSG];
    st_table *t = NULL;
    assert_int_equal(st_table_load_msg(dir, &xtx, &cfg, &t, msg, sizeof msg), ST_OK);
    int rows = 0;
    assert_true(st_table_lookup_mmvq(t, &(st_mmvq_key){ST_IQ3_S, 256, 256}, &rows));
    assert_int_equal(rows, 4);
    st_table_destroy(t);
    assert_int_equal(st_table_load_msg(dir, &xt, &cfg, &t, msg, sizeof msg), ST_OK);
    assert_int_equal(st_table_count(t), 2);
    st_table_destroy(t);
    /* a third SKU finds none, and is told which device it is */
    assert_int_not_equal(st_table_load_msg(dir, &gre, &cfg, &t, msg, sizeof msg), ST_OK);
    assert_null(t);
    char want[MSG];
    snprintf(want, sizeof want, "decode tuning: %s: no table matches this process (%s, device %s); 2 tables skipped", dir,
             hdr, gre.model);
    assert_string_equal(msg, want);
    /* two tables of one SKU: keep one */
    snprintf(text, sizeof text, "%s\ndevice %s\n", hdr, xtx.model);
    write_file(dir, "xtx2.table", text);
    assert_int_not_equal(st_table_load_msg(dir, &xtx, &cfg, &t, msg, sizeof msg), ST_OK);
    snprintf(want, sizeof want, "decode tuning: %s: 2 tables match this process (xtx.table, xtx2.table): keep one", dir);
    assert_string_equal(msg, want);
    const char *names[] = {"xtx.table", "xt.table", "xtx2.table"};
    for (int i = 0; i < 3; i++) {
        char p[512];
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        unlink(p);
    }
    rmdir(dir);
}

static void tuned_defaults_are_told_from_gaps(void **state)
{
    (void)state;
    st_table *t = NULL;
    char msg[MSG];
    const char *text = tbl("# tuned-default mmvq iq3_s 256 256\n# tuned-default expert iq3_s iq4_nl 256 64 2\n"
                           "# tuned-default mmvq q8_0 512 256\n# tuned-default nonsense here\nmmvq q8_0 512 256 2\n");
    assert_int_equal(parse_cfg(text, strlen(text), NULL, &t, msg), ST_OK);
    assert_true(st_table_tuned_default_mmvq(t, &(st_mmvq_key){ST_IQ3_S, 256, 256}));
    assert_true(st_table_tuned_default_expert(t, &(st_expert_key){ST_IQ3_S, ST_IQ4_NL, 256, 64, 2}));
    assert_false(st_table_tuned_default_expert(t, &(st_expert_key){ST_IQ3_S, ST_IQ4_NL, 256, 64, 3}));
    assert_false(st_table_tuned_default_mmvq(t, &(st_mmvq_key){ST_IQ3_S, 512, 256}));
    /* a row wins over a tuned-default comment of the same shape */
    assert_false(st_table_tuned_default_mmvq(t, &(st_mmvq_key){ST_Q8_0, 512, 256}));
    assert_int_equal(st_table_count(t), 1);
    st_table_destroy(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(device_model_names_the_sku),
        cmocka_unit_test(a_table_engages_only_on_its_device),
        cmocka_unit_test(the_device_line_is_checked_for_form_and_place),
        cmocka_unit_test(a_table_written_with_a_model_reads_back),
        cmocka_unit_test(a_fleet_directory_picks_the_table_of_this_sku),
        cmocka_unit_test(tuned_defaults_are_told_from_gaps),
    };
    return cmocka_run_group_tests(tests, group_setup, NULL);
}
