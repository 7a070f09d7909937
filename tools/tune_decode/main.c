/* tune_decode: tune, check and inspect strata-tune decode kernels.
 * A thin front end on the public API of the two libraries: argument parsing
 * and printing here, the work in libstrata_tools and libstrata_tune. */
#include "commands.h"

#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char USAGE[] =
    "usage: tune_decode [-q] [--json] COMMAND [ARGS]\n"
    "\n"
    "Commands:\n"
    "  table check PATH      say whether this machine would engage the table (PATH: file or\n"
    "                        tables directory), and why not\n"
    "  table show PATH       print a table's identity, provenance and shapes (no checks against\n"
    "                        this machine)\n"
    "  table list DIR        the tables folder from its index (tables.json): which table engages\n"
    "                        here and why each other does not; --prune removes superseded ones\n"
    "  variants              print the compiled-in rows variants and the dispatch knobs\n"
    "  identity              print the header tokens this process writes and accepts\n"
    "  vectors FILE...       check reference-vector (.stqv) files against the decoders and the\n"
    "                        CPU reference; one pass/fail line per type and section\n"
    "  shapes MODEL.gguf     list the decode shapes and types a GGUF model needs\n"
    "  tune [MODEL.gguf]     tune this machine: byte-compare and time every variant, write a\n"
    "                        table (gated end to end), a JSON and an HTML report and the folder's\n"
    "                        tables.json (demo set without a model)\n"
    "  report FILE.json      render a report's HTML page again from its JSON\n"
    "  verify MODEL TABLE    the end-to-end gate: a whole decode step without and with the table\n"
    "  coverage MODEL TABLE  which shapes the model needs that the table lacks; would it engage?\n"
    "  bench                 bandwidth probes, iq_mmvq, expert_grouped and decode-step figures\n"
    "                        (--html FILE: the figures as a page)\n"
    "  settings MODEL.gguf   sweep an engine's settings (llama-server: speculative decoding,\n"
    "                        draft length and floor, threads) on your prompts, adopting only what\n"
    "                        keeps every greedy token; writes a profile and a report\n"
    "\n"
    "Options:\n"
    "  -q, --quiet           no progress output\n"
    "  --json                machine-readable output where the command has it\n"
    "  --backend B           auto (default: the GPU when present, else CPU), cpu or gpu\n"
    "  --device N            which GPU (default 0); tune, verify and coverage also take a list\n"
    "                        (--device 0,1) or all: each device in turn, its index on every line\n"
    "  -h, --help            this text (also: tune_decode COMMAND --help)\n"
    "  --version             print the version\n"
    "\n"
    "Environment: STRATA_DECODE_TUNING (table file or directory), the dispatch knobs\n"
    "(tune_decode variants lists them).\n";

int td_usage_error(const char *fmt, ...)
{
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    td_eprint("tune_decode: %s", msg);
    fputs("(tune_decode --help shows the commands)\n", stderr);
    return 2;
}

typedef struct {
    const char *name;
    int (*fn)(int, char **, const td_global *);
} td_command;

static const td_command COMMANDS[] = {
    {"table", cmd_table},       {"variants", cmd_variants}, {"identity", cmd_identity},
    {"vectors", cmd_vectors},   {"shapes", cmd_shapes},     {"tune", cmd_tune},
    {"verify", cmd_verify},     {"coverage", cmd_coverage}, {"bench", cmd_bench},
    {"report", cmd_report},     {"settings", cmd_settings},
};

static bool is_help_arg(int argc, char **argv)
{
    for (int i = 2; i < argc; i++)
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) return true;
    return false;
}

/* verify / coverage --device LIST|all: the command on each device in turn,
 * a header line before each; the exit status is the worst of them
 * (st_devices_worse_exit). */
static int per_device(const td_command *c, int argc, char **argv, const td_global *g)
{
    if (g->json)
        return td_usage_error("%s --json prints one document for one device: run it once per --device N", c->name);
    for (int i = 2; i < argc; i++)
        if (!strcmp(argv[i], "--html"))
            return td_usage_error("%s --html writes one page for one device: run it once per --device N", c->name);
    int devs[TD_MAX_DEVICES], backend = 0;
    const int n = td_device_list(g, devs, &backend);
    if (n < 0) return 1;
    int worst = 0;
    for (int i = 0; i < n; i++) {
        td_global one = *g;
        one.device = devs[i];
        one.devices[0] = devs[i];
        one.n_devices = 1;
        one.device_all = false;
        one.backend = backend;
        char prefix[32];
        snprintf(prefix, sizeof prefix, "[device %d] ", devs[i]);
        printf("%s== %s on device %d (%d of %d)\n", i ? "\n" : "", c->name, devs[i], i + 1, n);
        fflush(stdout);
        td_log_prefix(prefix);
        const int rc = c->fn(argc - 1, argv + 1, &one);
        td_log_prefix(NULL);
        fflush(stdout);
        if (rc >= 128 || rc == 2) return rc; /* stopped by a signal, or a usage error: not run again */
        worst = st_devices_worse_exit(worst, rc);
    }
    return worst;
}

int main(int argc, char **argv)
{
    td_global g;
    memset(&g, 0, sizeof g);
    g.backend = ST_BACKEND_AUTO;
    /* the library's lines carry names from files: show them escaped */
    st_set_log(td_log_sink, NULL);
    /* A reader that went away (`tune ... | head -1`) makes a print fail,
     * never the run: the exit status says what happened to the files
     * (td_signals.c). */
    signal(SIGPIPE, SIG_IGN);
    td_signals_guard();
    /* Global flags may appear anywhere; remove them so commands see only
     * their own arguments. */
    int n = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-q") || !strcmp(argv[i], "--quiet"))
            g.quiet = true;
        else if (!strcmp(argv[i], "--json"))
            g.json = true;
        else if (!strcmp(argv[i], "--backend") || !strcmp(argv[i], "--device")) {
            if (i + 1 >= argc) return td_usage_error("%s needs a value", argv[i]);
            if (argv[i + 1][0] == '-' && argv[i + 1][1]) return td_usage_error("%s needs a value, found the option '%s'", argv[i], argv[i + 1]);
            const char *v = argv[++i];
            if (!strcmp(argv[i - 1], "--device")) {
                char why[96];
                g.n_devices = st_devices_parse(v, g.devices, TD_MAX_DEVICES, &g.device_all, why, sizeof why);
                if (g.n_devices < 0) return td_usage_error("--device '%s': %s", v, why);
                g.device = g.n_devices > 0 ? g.devices[0] : 0;
            } else if (!strcmp(v, "auto"))
                g.backend = ST_BACKEND_AUTO;
            else if (!strcmp(v, "cpu"))
                g.backend = ST_BACKEND_CPU;
            else if (!strcmp(v, "gpu"))
                g.backend = ST_BACKEND_GPU;
            else
                return td_usage_error("--backend: '%s' is not one of auto, cpu, gpu", v);
        }
        else
            argv[++n] = argv[i];
    }
    argc = n + 1;
    if (argc < 2) {
        fputs(USAGE, stderr);
        return 2;
    }
    if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
        fputs(USAGE, stdout);
        return 0;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("tune_decode %s (strata-tune, GPU backend: %s, source %s)\n", st_version(), st_gpu_backend_name(),
               st_source_commit());
        return 0;
    }
    for (size_t i = 0; i < sizeof COMMANDS / sizeof COMMANDS[0]; i++)
        if (!strcmp(argv[1], COMMANDS[i].name)) {
            const bool each = !strcmp(argv[1], "verify") || !strcmp(argv[1], "coverage");
            if (td_many_devices(&g) && strcmp(argv[1], "tune") && !each && !is_help_arg(argc, argv))
                return td_usage_error("%s takes one device: --device N (a list or all is for tune, verify and coverage)",
                                      argv[1]);
            if (td_many_devices(&g) && each && !is_help_arg(argc, argv)) return per_device(&COMMANDS[i], argc, argv, &g);
            return COMMANDS[i].fn(argc - 1, argv + 1, &g);
        }
    if (argv[1][0] == '-') return td_usage_error("unknown option '%s'", argv[1]);
    return td_usage_error("unknown command '%s'", argv[1]);
}
