/* The registry of live temporary files: see tmpfiles.h. A slot's path is
 * written before the slot is marked used, and a handler only reads marked
 * slots, so a signal between the two steps finds the slot unused. */
#include "tmpfiles.h"

#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

static char g_path[ST_TMPFILE_SLOTS][ST_TMPFILE_PATH_MAX];
static volatile sig_atomic_t g_used[ST_TMPFILE_SLOTS];

int st_tmpfile_track(const char *path)
{
    const size_t n = path ? strlen(path) : 0;
    if (!n || n >= ST_TMPFILE_PATH_MAX) return -1;
    for (int i = 0; i < ST_TMPFILE_SLOTS; i++)
        if (!g_used[i]) {
            memcpy(g_path[i], path, n + 1);
            atomic_signal_fence(memory_order_seq_cst); /* the path before the mark */
            g_used[i] = 1;
            return i;
        }
    return -1;
}

void st_tmpfile_untrack(int slot)
{
    if (slot >= 0 && slot < ST_TMPFILE_SLOTS) g_used[slot] = 0;
}

void st_tmpfiles_remove_all(void)
{
    for (int i = 0; i < ST_TMPFILE_SLOTS; i++)
        if (g_used[i]) {
            unlink(g_path[i]);
            g_used[i] = 0;
        }
}
