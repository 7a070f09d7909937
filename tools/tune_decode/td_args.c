/* Option values for the tune_decode commands: a value is never taken from
 * the next option ("--out --quick" would make a folder named --quick), and
 * numbers are checked for form, range and finiteness ("--threshold nan"
 * compares false with every bound, so a plain range check lets it through). */
#include "commands.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *td_value(int argc, char **argv, int *i, const char *cmd, int *rc)
{
    const char *opt = argv[*i];
    if (*i + 1 >= argc) {
        *rc = td_usage_error("%s: %s needs a value", cmd, opt);
        return NULL;
    }
    const char *v = argv[*i + 1];
    /* "-5" may be a (refused) number; "-x" or "--x" is the next option */
    if (v[0] == '-' && v[1] != '\0' && !(v[1] >= '0' && v[1] <= '9') && v[1] != '.') {
        *rc = td_usage_error("%s: %s needs a value, found the option '%s' (a value starting with '-' can be "
                             "written ./%s for a path)",
                             cmd, opt, v, v);
        return NULL;
    }
    (*i)++;
    return v;
}

bool td_parse_int(const char *v, long lo, long hi, long *out)
{
    if (!v || v[0] < '0' || v[0] > '9') return false; /* no sign, no blank */
    char *end;
    errno = 0;
    const long x = strtol(v, &end, 10);
    if (errno || *end || x < lo || x > hi) return false;
    *out = x;
    return true;
}

int td_ntok_list(const char *s, int *v, int max)
{
    int n = 0;
    const char *p = s;
    for (;;) {
        const char *comma = strchr(p, ',');
        const size_t len = comma ? (size_t)(comma - p) : strlen(p);
        char item[16];
        long x;
        if (len == 0 || len >= sizeof item || n >= max) return -1;
        memcpy(item, p, len);
        item[len] = '\0';
        if (!td_parse_int(item, 1, ST_MAX_TOKENS, &x)) return -1;
        for (int k = 0; k < n; k++)
            if (v[k] == (int)x) return -1;
        v[n++] = (int)x;
        if (!comma) return n;
        p = comma + 1;
    }
}

int td_int_option(const char *cmd, const char *opt, const char *v, long lo, long hi, int *out)
{
    long x;
    if (!td_parse_int(v, lo, hi, &x))
        return td_usage_error("%s: %s '%s' is not a whole number in %ld..%ld", cmd, opt, v, lo, hi);
    *out = (int)x;
    return 0;
}

int td_percent_option(const char *cmd, const char *opt, const char *v, double lo, double hi, double *frac)
{
    char *end;
    errno = 0;
    const double t = strtod(v, &end);
    const bool ok = end != v && (!*end || !strcmp(end, "%")) && errno == 0 && isfinite(t) && t >= lo && t <= hi;
    if (!ok)
        return td_usage_error("%s: %s '%s' is not a percentage in %g..%g (like 1%%)", cmd, opt, v, lo, hi);
    *frac = t / 100.0;
    return 0;
}

int td_seconds_option(const char *cmd, const char *opt, const char *v, double lo, double hi, bool lo_open, double *out)
{
    char *end;
    errno = 0;
    const double t = strtod(v, &end);
    const bool ok = end != v && (!*end || !strcmp(end, "s")) && errno == 0 && isfinite(t) && (lo_open ? t > lo : t >= lo) &&
                    t <= hi;
    if (!ok)
        return td_usage_error("%s: %s '%s' is not a number of seconds in %s%g, %g]", cmd, opt, v, lo_open ? "(" : "[", lo,
                              hi);
    *out = t;
    return 0;
}
