/* Signals during the commands that write files or run long (tune, verify).
 * Every signal whose default action ends the process and that can be
 * caught is handled: the stop signals (SIGHUP, SIGINT, SIGTERM, SIGQUIT,
 * SIGUSR1/2, SIGALRM, SIGVTALRM, SIGPROF, SIGXCPU, SIGIO, SIGPWR, SIGSTKFLT and
 * every real-time signal SIGRTMIN..SIGRTMAX) set the stop flag the library
 * polls, so the run ends cleanly through its own cleanup (no table, no
 * candidate, no temporary file); SIGPIPE and SIGXFSZ are ignored, so a
 * closed pipe or the file-size limit turns into a failed write with its
 * reason instead of a death in the middle of one. SIGPIPE stays ignored
 * after td_signals_end (main ignores it for the whole run): the lines
 * printed after an install (to a pipe a reader such as `head -1` closed)
 * must not turn a completed install into a death by SIGPIPE (exit 141);
 * the exit status says what happened to the files. The fault signals (SIGSEGV,
 * SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGTRAP, SIGSYS), where the process
 * cannot go on, remove the library's live temporary files (tmpfiles.h) and
 * then hand the signal to what was installed before (a sanitizer's handler
 * still reports the fault), else end the process as the signal would.
 * Outside begin..end (every other command's writes: report -o, --html
 * pages, the index of table list, the folder's lock of prune), a stop
 * signal removes the live temporary files and the lock the same way and
 * then ends the process as it would have (td_signals_guard, from main). */
#define _POSIX_C_SOURCE 200809L
#include "commands.h"

#include <signal.h>
#include <string.h>

static volatile int *g_stop_flag;
static volatile sig_atomic_t g_caught;

static const int STOP_SIGNALS[] = {SIGHUP,  SIGINT,    SIGTERM, SIGQUIT, SIGUSR1, SIGUSR2,
                                   SIGALRM, SIGVTALRM, SIGPROF, SIGXCPU,
#ifdef SIGIO
                                   SIGIO, /* SIGPOLL */
#endif
#ifdef SIGPWR
                                   SIGPWR,
#endif
#ifdef SIGSTKFLT
                                   SIGSTKFLT,
#endif
};
static const int IGNORED_SIGNALS[] = {SIGPIPE, SIGXFSZ};
static const int FAULT_SIGNALS[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGTRAP, SIGSYS};

#define N_(a) (sizeof(a) / sizeof((a)[0]))
/* what was installed before, by signal number (restored at the end, and
 * handed a fault on, so a sanitizer's own report still comes) */
#define MAX_SIG 65 /* Linux: SIGRTMAX is 64 */
static struct sigaction g_saved[MAX_SIG];

static void on_stop(int sig)
{
    if (!g_caught) g_caught = sig;
    if (g_stop_flag) *g_stop_flag = 1;
}

static void on_fault(int sig)
{
    st_tmpfiles_remove_all();
    if (sig > 0 && sig < MAX_SIG) sigaction(sig, &g_saved[sig], NULL); /* the previous action, or the default */
    raise(sig);
}

/* A stop signal outside begin..end: the temporary files go, then the
 * signal's own default action (the exit status says which signal). */
static void on_stop_outside(int sig)
{
    st_tmpfiles_remove_all();
    signal(sig, SIG_DFL);
    raise(sig);
}

/* A signal the process was started with ignored (nohup: SIGHUP; a
 * background job of a script: SIGINT, SIGQUIT) stays ignored, here and in
 * the engines it starts; SIG_IGN itself (SIGPIPE, SIGXFSZ) is always set. */
static void install(const int *sigs, size_t n, void (*fn)(int), int flags)
{
    for (size_t i = 0; i < n; i++) {
        if (sigs[i] >= MAX_SIG) continue;
        struct sigaction sa, old;
        if (fn != SIG_IGN && sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler == SIG_IGN) {
            g_saved[sigs[i]] = old;
            continue;
        }
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = fn;
        sa.sa_flags = flags;
        sigfillset(&sa.sa_mask);
        sigaction(sigs[i], &sa, &g_saved[sigs[i]]);
    }
}

int td_signals_caught(void) { return g_caught; }

/* SIGRTMIN..SIGRTMAX (not constants: the C library keeps a few). */
static size_t rt_signals(int *out, size_t cap)
{
    size_t n = 0;
#ifdef SIGRTMIN
    for (int s = SIGRTMIN; s <= SIGRTMAX && n < cap; s++) out[n++] = s;
#endif
    return n;
}

size_t td_signals_all(int *sig, td_sig_kind *kind, size_t cap)
{
    const int *lists[3] = {STOP_SIGNALS, IGNORED_SIGNALS, FAULT_SIGNALS};
    const size_t ns[3] = {N_(STOP_SIGNALS), N_(IGNORED_SIGNALS), N_(FAULT_SIGNALS)};
    const td_sig_kind kinds[3] = {TD_SIG_STOP, TD_SIG_IGNORED, TD_SIG_FAULT};
    size_t n = 0;
    for (int l = 0; l < 3; l++)
        for (size_t i = 0; i < ns[l] && n < cap; i++, n++) {
            sig[n] = lists[l][i];
            kind[n] = kinds[l];
        }
    int rt[MAX_SIG];
    const size_t nrt = rt_signals(rt, MAX_SIG);
    for (size_t i = 0; i < nrt && n < cap; i++, n++) {
        sig[n] = rt[i];
        kind[n] = TD_SIG_STOP;
    }
    return n;
}

void td_signals_guard(void)
{
    install(STOP_SIGNALS, N_(STOP_SIGNALS), on_stop_outside, SA_NODEFER);
    int rt[MAX_SIG];
    install(rt, rt_signals(rt, MAX_SIG), on_stop_outside, SA_NODEFER);
}

void td_signals_begin(volatile int *stop)
{
    g_stop_flag = stop;
    g_caught = 0;
    install(STOP_SIGNALS, N_(STOP_SIGNALS), on_stop, SA_RESTART);
    int rt[MAX_SIG];
    install(rt, rt_signals(rt, MAX_SIG), on_stop, SA_RESTART);
    install(IGNORED_SIGNALS, N_(IGNORED_SIGNALS), SIG_IGN, 0);
    install(FAULT_SIGNALS, N_(FAULT_SIGNALS), on_fault, SA_NODEFER);
}

void td_signals_end(void)
{
    const int *lists[3] = {STOP_SIGNALS, IGNORED_SIGNALS, FAULT_SIGNALS};
    const size_t ns[3] = {N_(STOP_SIGNALS), N_(IGNORED_SIGNALS), N_(FAULT_SIGNALS)};
    for (int l = 0; l < 3; l++)
        for (size_t i = 0; i < ns[l]; i++)
            if (lists[l][i] < MAX_SIG && lists[l][i] != SIGPIPE) sigaction(lists[l][i], &g_saved[lists[l][i]], NULL);
    int rt[MAX_SIG];
    const size_t nrt = rt_signals(rt, MAX_SIG);
    for (size_t i = 0; i < nrt; i++)
        if (rt[i] < MAX_SIG) sigaction(rt[i], &g_saved[rt[i]], NULL);
    g_stop_flag = NULL;
}
