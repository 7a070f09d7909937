/* The sizes and shards of a GPU test (tests/common/gpu_test_size.h), which
 * tools/device-sanitize.sh runs side by side: the n shards of a test run
 * every unit of work exactly once between them, a test of cmocka cases
 * sharded by case (TEST_SHARD_CASES) likewise, and a malformed shard or one
 * left with no case fails instead of passing on nothing. Each shard runs in
 * a child process, as each sanitizer run is its own process. */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "gpu_test_size.h"

#include <sys/wait.h>
#include <unistd.h>

enum { N_UNITS = 23, N_CASES = 5 };

static void case_fn(void **state) { (void)state; }

/* In a child with STRATA_GPU_TEST_SHARD=SHARD (NULL: unset): which of the
 * N_UNITS units (cases: the N_CASES cmocka cases) it takes, as a bit mask;
 * its exit status in *status. */
static unsigned long shard_mask(const char *shard, bool cases, int *status)
{
    int fd[2];
    assert_int_equal(pipe(fd), 0);
    const pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fd[0]);
        if (shard) setenv("STRATA_GPU_TEST_SHARD", shard, 1);
        else unsetenv("STRATA_GPU_TEST_SHARD");
        unsigned long m = 0;
        if (cases) {
            /* each case's state: its index */
            static int idx[N_CASES] = {0, 1, 2, 3, 4};
            const struct CMUnitTest tests[N_CASES] = {
                cmocka_unit_test_prestate(case_fn, &idx[0]), cmocka_unit_test_prestate(case_fn, &idx[1]),
                cmocka_unit_test_prestate(case_fn, &idx[2]), cmocka_unit_test_prestate(case_fn, &idx[3]),
                cmocka_unit_test_prestate(case_fn, &idx[4]),
            };
            struct CMUnitTest run[N_CASES];
            size_t n = 0;
            /* stderr quiet: the refusal is expected in some children */
            if (!freopen("/dev/null", "w", stderr)) _exit(9);
            TEST_SHARD_CASES(tests, run, n);
            if (test_shard_unit_ != 0) _exit(5); /* the units of test_shard_next left to the cases */
            int last = -1;
            for (size_t j = 0; j < n; j++) {
                const int i = *(const int *)run[j].initial_state;
                if (i <= last) _exit(8); /* in their order */
                last = i;
                m |= 1ul << i;
            }
        } else {
            for (int i = 0; i < N_UNITS; i++)
                if (test_shard_next()) m |= 1ul << i;
        }
        if (write(fd[1], &m, sizeof m) != (ssize_t)sizeof m) _exit(7);
        _exit(0);
    }
    close(fd[1]);
    unsigned long m = 0;
    const ssize_t got = read(fd[0], &m, sizeof m);
    close(fd[0]);
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    *status = WEXITSTATUS(st);
    if (*status == 0) assert_int_equal(got, (ssize_t)sizeof m);
    return m;
}

/* Unsharded and split into 1..MAX_N shards, the units (CASES: the cmocka
 * cases) of a test are taken exactly once between the shards, every shard
 * passing (and, for cases, holding one at least). */
static void check_partition(bool cases, int n_units, int max_n)
{
    int st;
    const unsigned long all = (1ul << n_units) - 1;
    assert_int_equal(shard_mask(NULL, cases, &st), all);
    assert_int_equal(st, 0);
    for (int n = 1; n <= max_n; n++) {
        unsigned long seen = 0;
        for (int k = 0; k < n; k++) {
            char s[32];
            snprintf(s, sizeof s, "%d/%d", k, n);
            const unsigned long m = shard_mask(s, cases, &st);
            assert_int_equal(st, 0);
            if (cases) assert_int_not_equal(m, 0);
            assert_int_equal(seen & m, 0); /* no unit twice */
            seen |= m;
        }
        assert_int_equal(seen, all); /* none left out */
    }
}

static void the_shards_cover_every_unit_once(void **state)
{
    (void)state;
    check_partition(false, N_UNITS, N_UNITS + 2);
}

static void cases_shard_by_case_and_an_empty_shard_fails(void **state)
{
    (void)state;
    int st;
    check_partition(true, N_CASES, N_CASES);
    /* more shards than cases: the last ones have none and fail */
    shard_mask("6/7", true, &st);
    assert_int_equal(st, 2);
}

static void a_malformed_shard_fails(void **state)
{
    (void)state;
    const char *bad[] = {"3/3", "-1/2", "1/0", "x", "1/2x", "1", "2/1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int st;
        shard_mask(bad[i], false, &st);
        assert_int_equal(st, 2);
    }
}

/* The racecheck size only under racecheck at the sanitizer size: the other
 * tools and the full run keep every token count. */
static void the_racecheck_size_needs_both(void **state)
{
    (void)state;
    const char *size[] = {NULL, "sanitizer", "full"}, *tool[] = {NULL, "racecheck", "memcheck"};
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) {
            if (size[i]) setenv("STRATA_GPU_TEST_SIZE", size[i], 1);
            else unsetenv("STRATA_GPU_TEST_SIZE");
            if (tool[j]) setenv("STRATA_SANITIZER_TOOL", tool[j], 1);
            else unsetenv("STRATA_SANITIZER_TOOL");
            assert_int_equal(racecheck_size(), i == 1 && j == 1);
            assert_int_equal(sanitizer_size(), i == 1);
        }
    unsetenv("STRATA_GPU_TEST_SIZE");
    unsetenv("STRATA_SANITIZER_TOOL");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(the_shards_cover_every_unit_once),
        cmocka_unit_test(cases_shard_by_case_and_an_empty_shard_fails),
        cmocka_unit_test(a_malformed_shard_fails),
        cmocka_unit_test(the_racecheck_size_needs_both),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
