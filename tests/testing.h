/*
 * testing.h - the test harness: cases, assertions that print both values, skips.
 *
 * Each binary lists its cases in main with GR_TEST_MAIN(...). The runner (testing.c) runs
 * every case in a child process of its own, in its own process group, under a time limit,
 * and prints one line per case that tools/test counts, at column 0: "PASS name",
 * "FAIL name: ..." or "SKIP name: reason"; then a summary line starting with '#'
 * ("# 12 passed, 1 failed, 2 skipped"). It goes on after a failure and exits 1 if any case
 * failed, else 0. A case fails when an assertion fails (the line gives file:line and both
 * values), or when its process dies of a signal, exits without reporting, or runs past the
 * time limit (then its whole process group is killed). Each case starts from the state the
 * binary had before any case ran: nothing one case does is seen by the next.
 *
 * Options:
 *   --only NAME        run that case alone
 *   --timeout SECONDS  each case's time limit; else GR_TEST_TIMEOUT from the environment,
 *                      else GR_TEST_TIMEOUT_S (120 unless the binary defines it before
 *                      including this file)
 *   --no-fork          run the cases in this process, with no time limit, stopping at the
 *                      first failure (for a debugger: break on gr__test_fail)
 *   --list             print the cases' names, one a line, in order, and exit 0 (for
 *                      tools/gpu_suite sanitize, which runs each under each tool)
 *
 * What the runner keeps to, so that cases may do what they like: its own process stays
 * single-threaded and never calls the runtime or CUDA (each child is a fresh process for
 * tsan and CUDA), and it uses no signal or timer in the child (a case may set SIGALRM,
 * call alarm() and fork()). A process a case forks should end with _exit(); an assertion
 * failing in it prints its message (not as a FAIL line) and _exit(1)s, and the case's own
 * process reports.
 *
 * Assertions are never compiled out.
 */
#ifndef GR_TESTING_H
#define GR_TESTING_H

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <graphrun.h>
/* Tests use the whole public API: fault injection and the example workloads too. */
#include <graphrun_testing.h>
#include <graphrun_workloads.h>

#ifndef GR_TEST_TIMEOUT_S
#define GR_TEST_TIMEOUT_S 120
#endif

typedef struct gr_test_case {
    const char *name;
    void (*fn)(void);
} gr_test_case;

/* The running case's name, and the reason SKIP gave (NULL until it does). */
extern const char *gr_test_current;
extern const char *gr_test_skip_reason;

/* Fails the current case: the message is "file:line: " and the formatted text. Does not
 * return. In a process the case forked, prints the message and _exit(1)s. */
_Noreturn void gr__test_fail(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The same from a signal handler (async-signal-safe): fails the current case with
 * `message` and _exit(1)s, for a case's own alarm. */
_Noreturn void gr_test_fail_from_signal(const char *message);

#define GR_TEST_FAIL(...) gr__test_fail(__FILE__, __LINE__, __VA_ARGS__)

#define ASSERT_TRUE(cond)                                                                   \
    do {                                                                                    \
        if (!(cond))                                                                        \
            GR_TEST_FAIL("expected %s", #cond);                                             \
    } while (0)

/* The outer macros stringify their arguments, so messages show the source text, not its
 * expansion. */
#define GR_ASSERT_CMP_(a, op, b, sa, sb)                                                    \
    do {                                                                                    \
        long long a_ = (long long)(a), b_ = (long long)(b);                                 \
        if (!(a_ op b_))                                                                    \
            GR_TEST_FAIL("expected %s %s %s, got %lld vs %lld", sa, #op, sb, a_, b_);       \
    } while (0)

#define GR_ASSERT_CMPU_(a, op, b, sa, sb)                                                   \
    do {                                                                                    \
        unsigned long long a_ = (unsigned long long)(a), b_ = (unsigned long long)(b);      \
        if (!(a_ op b_))                                                                    \
            GR_TEST_FAIL("expected %s %s %s, got %llu vs %llu", sa, #op, sb, a_, b_);       \
    } while (0)

/* Signed 64-bit comparisons (every integer type but uint64_t values above INT64_MAX). */
#define ASSERT_EQ(a, b) GR_ASSERT_CMP_(a, ==, b, #a, #b)
#define ASSERT_NE(a, b) GR_ASSERT_CMP_(a, !=, b, #a, #b)
#define ASSERT_LT(a, b) GR_ASSERT_CMP_(a, <, b, #a, #b)
#define ASSERT_LE(a, b) GR_ASSERT_CMP_(a, <=, b, #a, #b)
#define ASSERT_GT(a, b) GR_ASSERT_CMP_(a, >, b, #a, #b)
#define ASSERT_GE(a, b) GR_ASSERT_CMP_(a, >=, b, #a, #b)
/* Unsigned 64-bit comparisons: sizes, counts, byte totals. */
#define ASSERT_EQ_U64(a, b) GR_ASSERT_CMPU_(a, ==, b, #a, #b)
#define ASSERT_NE_U64(a, b) GR_ASSERT_CMPU_(a, !=, b, #a, #b)
#define ASSERT_LT_U64(a, b) GR_ASSERT_CMPU_(a, <, b, #a, #b)
#define ASSERT_LE_U64(a, b) GR_ASSERT_CMPU_(a, <=, b, #a, #b)
#define ASSERT_GT_U64(a, b) GR_ASSERT_CMPU_(a, >, b, #a, #b)
#define ASSERT_GE_U64(a, b) GR_ASSERT_CMPU_(a, >=, b, #a, #b)

/* Two floats with the same bits: what "equals the reference bit for bit" means. Unlike ==,
 * 0.0 and -0.0 differ, and a NaN equals a NaN of the same bits. Both arguments must be
 * floats (a double would be rounded to float silently): other types do not compile. */
#define ASSERT_FLOAT_BITS_EQ(a, b)                                                          \
    do {                                                                                    \
        _Static_assert(_Generic((a), float: 1, default: 0) &&                               \
                           _Generic((b), float: 1, default: 0),                             \
                       "ASSERT_FLOAT_BITS_EQ compares floats");                             \
        float a_ = (a), b_ = (b);                                                           \
        uint32_t abits_, bbits_;                                                            \
        memcpy(&abits_, &a_, sizeof(abits_));                                               \
        memcpy(&bbits_, &b_, sizeof(bbits_));                                               \
        if (abits_ != bbits_)                                                               \
            GR_TEST_FAIL("expected %s == %s bit for bit, got %.9g (0x%08" PRIx32            \
                         ") vs %.9g (0x%08" PRIx32 ")",                                     \
                         #a, #b, (double)a_, abits_, (double)b_, bbits_);                   \
    } while (0)

/* |a - b| <= tol, as doubles; a NaN on either side fails. */
#define ASSERT_DOUBLE_NEAR(a, b, tol)                                                       \
    do {                                                                                    \
        double a_ = (a), b_ = (b), tol_ = (tol);                                            \
        double d_ = a_ > b_ ? a_ - b_ : b_ - a_;                                            \
        if (!(d_ <= tol_))                                                                  \
            GR_TEST_FAIL("expected %s within %s of %s, got %.17g vs %.17g (difference "     \
                         "%.3g, tolerance %.3g)",                                           \
                         #a, #tol, #b, a_, b_, d_, tol_);                                   \
    } while (0)

#define ASSERT_PTR_EQ(a, b)                                                                 \
    do {                                                                                    \
        const void *a_ = (a), *b_ = (b);                                                    \
        if (a_ != b_)                                                                       \
            GR_TEST_FAIL("expected %s == %s, got %p vs %p", #a, #b, a_, b_);                \
    } while (0)

#define ASSERT_STATUS(a, b)                                                                 \
    do {                                                                                    \
        gr_status a_ = (a), b_ = (b);                                                       \
        if (a_ != b_)                                                                       \
            GR_TEST_FAIL("expected %s == %s, got '%s' (%d) vs '%s' (%d)", #a, #b,           \
                         gr_status_str(a_), (int)a_, gr_status_str(b_), (int)b_);           \
    } while (0)

/* Two strings equal; NULL equals nothing. */
#define ASSERT_STR_EQ(a, b)                                                                 \
    do {                                                                                    \
        const char *a_ = (a), *b_ = (b);                                                    \
        if (a_ == NULL || b_ == NULL || strcmp(a_, b_) != 0)                                \
            GR_TEST_FAIL("expected %s == %s, got %s%s%s vs %s%s%s", #a, #b,                 \
                         a_ ? "\"" : "", a_ ? a_ : "(null)", a_ ? "\"" : "",                \
                         b_ ? "\"" : "", b_ ? b_ : "(null)", b_ ? "\"" : "");               \
    } while (0)

#define ASSERT_STR_CONTAINS(hay, needle)                                                    \
    do {                                                                                    \
        const char *h_ = (hay), *n_ = (needle);                                             \
        if (h_ == NULL || strstr(h_, n_) == NULL)                                           \
            GR_TEST_FAIL("expected %s to contain \"%s\", got \"%s\"", #hay, n_,             \
                         h_ ? h_ : "(null)");                                               \
    } while (0)

/* The message of graph g's last refusal, through gr_graph_error_get (the one way to get
 * error detail): valid until the end of the enclosing block, "" when none. */
static inline const char *gr_test_graph_error_(const gr_graph *g, gr_error_info *e)
{
    gr_graph_error_get(g, e);
    return e->message;
}
#define GRAPH_ERROR(g) gr_test_graph_error_((g), &(gr_error_info){.status = GR_OK})

/* Skip the current case (say why) and return from it. */
#define SKIP(reason)                                                                        \
    do {                                                                                    \
        gr_test_skip_reason = (reason);                                                     \
        return;                                                                             \
    } while (0)

/* Runs the cases as the top of this file says, each with a time limit of
 * `default_timeout_s` unless --timeout or GR_TEST_TIMEOUT says otherwise; returns the exit
 * status (or exits 2 on a bad option). Call it from main, before anything else that starts
 * a thread or calls the runtime. */
int gr_test_run(const gr_test_case *cases, size_t n, int argc, char **argv,
                double default_timeout_s);

static inline int gr_test_run_all(const gr_test_case *cases, size_t n, int argc, char **argv)
{
    return gr_test_run(cases, n, argc, argv, GR_TEST_TIMEOUT_S);
}

#define GR_TEST(fn) {#fn, fn}
#define GR_TEST_MAIN(...)                                                                   \
    int main(int argc, char **argv)                                                         \
    {                                                                                       \
        static const gr_test_case cases_[] = {__VA_ARGS__};                                 \
        return gr_test_run_all(cases_, sizeof(cases_) / sizeof(cases_[0]), argc, argv);    \
    }

/* Helpers shared by tests. */

/* splitmix64: a fast, well-mixed deterministic generator for test data and choices. */
static inline uint64_t gr_test_rand(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in [0, n). */
static inline uint64_t gr_test_below(uint64_t *state, uint64_t n)
{
    return n ? gr_test_rand(state) % n : 0;
}

/* Command-line options of stress binaries: --threads N --duration S --seed X (also --k=v). */
typedef struct gr_stress_opts {
    unsigned threads;
    double duration_s;
    uint64_t seed;
} gr_stress_opts;

void gr_stress_parse(int argc, char **argv, gr_stress_opts *o);

/* A stress binary's time limit: its duration and two minutes to start and finish. */
static inline double gr_stress_timeout_s(const gr_stress_opts *o)
{
    return o->duration_s + 120;
}

#endif /* GR_TESTING_H */
