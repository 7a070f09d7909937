/* gguf_gen DIR [ARCH...]: writes DIR/<arch>.gguf, the tiny model of each
 * architecture (all of gguf_gen.h's GG_ARCHS when none is named), for the
 * command-line test of tune_decode (tests/tuning/arch_models_test.sh). */
#include "gguf_gen.h"

#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        fprintf(argc < 2 ? stderr : stdout, "usage: gguf_gen DIR [ARCH...]\narchitectures:");
        for (int i = 0; GG_ARCHS[i]; i++) fprintf(argc < 2 ? stderr : stdout, " %s", GG_ARCHS[i]);
        fputc('\n', argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    int n = 0;
    for (int i = 0; argc > 2 ? i + 2 < argc : GG_ARCHS[i] != NULL; i++) {
        const char *arch = argc > 2 ? argv[i + 2] : GG_ARCHS[i];
        gg_file *f = gg_arch_model(arch);
        if (!f) {
            fprintf(stderr, "gguf_gen: unknown architecture '%s'\n", arch);
            return 1;
        }
        char path[4096];
        snprintf(path, sizeof path, "%s/%s.gguf", argv[1], arch);
        int rc = gg_write(f, 20261201, path);
        gg_free(f);
        if (rc != 0) return 1;
        printf("%s\n", path);
        n++;
    }
    return n > 0 ? 0 : 1;
}
