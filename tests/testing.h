/*
 * testing.h - the test harness: cases, assertions that print both sides, skips.
 *
 * Each binary lists its cases in main with GR_TEST_MAIN(...). Every case prints one line
 * that tools/test counts: "PASS name", "FAIL name: ..." or "SKIP name: reason". A failed
 * assertion prints its FAIL line with both values and ends the binary (exit status 1), so
 * no later case runs on broken state. Assertions are never compiled out.
 */
#ifndef GR_TESTING_H
#define GR_TESTING_H

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/graphrun.h"

typedef struct gr_test_case {
    const char *name;
    void (*fn)(void);
} gr_test_case;

extern const char *gr_test_current;
extern const char *gr_test_skip_reason;

#define GR_TEST_FAIL(...)                                                                   \
    do {                                                                                    \
        printf("FAIL %s: %s:%d: ", gr_test_current, __FILE__, __LINE__);                    \
        printf(__VA_ARGS__);                                                                \
        printf("\n");                                                                       \
        fflush(stdout);                                                                     \
        _exit(1);                                                                           \
    } while (0)

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

/* Skip the current case (say why) and return from it. */
#define SKIP(reason)                                                                        \
    do {                                                                                    \
        gr_test_skip_reason = (reason);                                                     \
        return;                                                                             \
    } while (0)

int gr_test_run_all(const gr_test_case *cases, size_t n, int argc, char **argv);

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

#endif /* GR_TESTING_H */
