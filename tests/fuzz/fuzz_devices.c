/* Fuzz target: the --device value (st_devices_parse) and the pass plan it
 * drives (st_devices_plan_step). The input is the value's text. Checked:
 * the parser answers -1 with a reason, "all", or distinct indices 0..1023,
 * at most the maximum, and the same list printed back parses to the same;
 * a plan over as many devices as were named, stepped with the indices as
 * the passes' changes, ends within two passes per device, never names a
 * device outside the group, and counts only the changes after the first
 * pass. Any sanitizer report, or an abort() below, is a finding. */
#include "fuzz_target.h"
#include "strata/tools/devices.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char text[512];
    const size_t n = size < sizeof text - 1 ? size : sizeof text - 1;
    memcpy(text, data, n);
    text[n] = '\0';
    int v[ST_DEVICES_MAX], w[ST_DEVICES_MAX];
    bool all = false, all2 = false;
    char msg[96] = "";
    const int c = st_devices_parse(text, v, ST_DEVICES_MAX, &all, msg, sizeof msg);
    if (c < -1 || c > ST_DEVICES_MAX) abort();
    if (c == -1) {
        if (!msg[0] || all) abort();
        return 0;
    }
    if (all != (c == 0) || (all && strcmp(text, "all"))) abort();
    char back[ST_DEVICES_MAX * 6 + 1] = "";
    for (int i = 0; i < c; i++) {
        if (v[i] < 0 || v[i] > 1023) abort();
        for (int k = 0; k < i; k++)
            if (v[k] == v[i]) abort();
        snprintf(back + strlen(back), sizeof back - strlen(back), "%s%d", i ? "," : "", v[i]);
    }
    if (c > 0) {
        if (st_devices_parse(back, w, ST_DEVICES_MAX, &all2, msg, sizeof msg) != c || all2) abort();
        if (memcmp(v, w, (size_t)c * sizeof *v)) abort();
    }
    const int devices = c > 0 ? c : 1;
    st_devices_plan p;
    st_devices_plan_init(&p, devices);
    int passes = 0, later = 0;
    for (int d = p.next; d >= 0; passes++) {
        if (d >= devices || passes >= 2 * devices) abort();
        const int changed = c > 0 ? v[passes % c] % 4 - 1 : 0;
        if (passes > 0 && changed > 0) later += changed;
        d = st_devices_plan_step(&p, changed);
    }
    if (p.passes != passes || p.changes != later || passes < 1) abort();
    return 0;
}
