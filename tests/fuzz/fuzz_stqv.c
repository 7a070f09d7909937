#include "fuzz_target.h"
#include "strata/tools/vectors.h"
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    st_stqv *s = NULL;
    if (st_stqv_parse(data, size, &s) == ST_OK) {
        for (int i = 0; i < ST_STQV_N_SECTIONS; i++) {
            size_t n;
            const volatile uint8_t *p = st_stqv_section_data(s, i, &n);
            if (p && n) (void)(p[0] + p[n - 1]);
        }
        st_stqv_close(s);
    }
    return 0;
}
