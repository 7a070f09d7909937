/* The entry point every fuzz target defines (libFuzzer's), and the corpus
 * replayer (replay_main.c) calls. */
#ifndef FUZZ_TARGET_H
#define FUZZ_TARGET_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#endif
