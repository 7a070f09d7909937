/* gguf_gen DIR [ARCH...]: writes DIR/<arch>.gguf, the tiny model of each
 * architecture (all of gguf_gen.h's GG_ARCHS when none is named), for the
 * command-line test of tune_decode (tests/tuning/arch_models_test.sh).
 * gguf_gen --llama OUT.gguf VOCAB.gguf [LAYERS EMBD FF EXPERTS TOP_K]: a
 * random-weight qwen3moe with VOCAB's tokenizer that llama.cpp loads and
 * runs (default 2 256 256 8 2). */
#include "gguf_gen.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    if (argc >= 4 && !strcmp(argv[1], "--llama")) {
        gg_llama_dims d = {2, 256, 256, 8, 2};
        int *v[] = {&d.n_layer, &d.n_embd, &d.n_ff, &d.n_expert, &d.top_k};
        for (int i = 4; i < argc && i < 9; i++) *v[i - 4] = atoi(argv[i]);
        gg_file *f = gg_llama_qwen3moe(argv[3], &d);
        const int rc = gg_write(f, 20261202, argv[2]);
        gg_free(f);
        if (rc == 0) printf("%s\n", argv[2]);
        return rc == 0 ? 0 : 1;
    }
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        fprintf(argc < 2 ? stderr : stdout, "usage: gguf_gen DIR [ARCH...]\n       gguf_gen --llama OUT.gguf VOCAB.gguf [LAYERS EMBD FF EXPERTS TOP_K]\narchitectures:");
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
