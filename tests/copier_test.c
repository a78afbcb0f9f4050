/*
 * copier_test.c - the copy pool: every byte copied exactly where asked, for large copies
 * split into pieces, many small ones, zero-length ones, a pool of no helpers, and many
 * threads copying at once.
 */
#include <pthread.h>

#include "runtime/core/copier.h"
#include "tests/testing.h"

static void fill(unsigned char *p, uint64_t n, uint64_t seed)
{
    for (uint64_t i = 0; i < n; i++)
        p[i] = (unsigned char)(gr_test_rand(&seed) >> 56);
}

/* Copy `n` random regions out of src into dst and check dst byte for byte. */
static void copy_and_check(gr_copier *c, uint64_t seed, size_t n, uint64_t max_bytes)
{
    uint64_t rng = seed, total = 0;
    gr_copy *ops = calloc(n, sizeof(*ops));
    uint64_t *ends = calloc(n, sizeof(*ends));
    uint64_t *sizes = calloc(n, sizeof(*sizes));
    unsigned char *src, *dst;

    for (size_t i = 0; i < n; i++)
        total += sizes[i] = gr_test_below(&rng, max_bytes + 1);
    src = malloc(total + 1);
    dst = malloc(total + 1);
    fill(src, total, seed);
    memset(dst, 0xa5, total + 1);
    for (size_t i = 0, off = 0; i < n; off += sizes[i++]) {
        ops[i].dst = dst + off;
        ops[i].src = src + off;
        ops[i].bytes = sizes[i];
    }
    gr__copier_copy(c, ops, n, ends);
    ASSERT_TRUE(memcmp(dst, src, total) == 0);
    ASSERT_EQ(dst[total], 0xa5); /* nothing past the end */
    free(src);
    free(dst);
    free(ops);
    free(ends);
    free(sizes);
}

static void copies_every_byte(void)
{
    gr_copier *c;

    ASSERT_STATUS(gr__copier_create(3, &c), GR_OK);
    copy_and_check(c, 1, 1, 9 << 20);     /* one large copy, cut into 1 MiB pieces */
    copy_and_check(c, 2, 4096, 20000);    /* many small ones */
    copy_and_check(c, 3, 17, 3 << 20);    /* a mix */
    copy_and_check(c, 4, 10, 0);          /* all empty */
    gr__copier_copy(c, NULL, 0, NULL);
    gr__copier_destroy(c);
    gr__copier_destroy(NULL);
}

/* Empty copies, NULL pointers and all, between real ones that straddle piece boundaries:
 * skipped, and the others land where asked. */
static void empty_copies_among_others(void)
{
    enum { N = 9, SIZE = 700000 };
    unsigned char *src = malloc(N * SIZE), *dst = malloc(N * SIZE);
    gr_copy ops[2 * N];
    uint64_t ends[2 * N], seed = 77;
    gr_copier *c;

    fill(src, N * SIZE, seed);
    memset(dst, 0, N * SIZE);
    for (int i = 0; i < N; i++) {
        ops[2 * i] = (gr_copy){.dst = NULL, .src = NULL, .bytes = 0};
        ops[2 * i + 1] = (gr_copy){.dst = dst + i * SIZE, .src = src + i * SIZE, .bytes = SIZE};
    }
    ASSERT_STATUS(gr__copier_create(2, &c), GR_OK);
    gr__copier_copy(c, ops, 2 * N, ends);
    ASSERT_TRUE(memcmp(dst, src, N * SIZE) == 0);
    ASSERT_EQ_U64(ends[2 * N - 1], (uint64_t)N * SIZE);
    gr__copier_destroy(c);
    free(src);
    free(dst);
}

static void no_helpers(void)
{
    gr_copier *c;

    ASSERT_STATUS(gr__copier_create(0, &c), GR_OK);
    copy_and_check(c, 5, 20, 3 << 20);
    gr__copier_destroy(c);
}

typedef struct arg {
    gr_copier *c;
    uint64_t seed;
} arg;

static void *copier_thread(void *p)
{
    arg *a = p;

    for (int round = 0; round < 4; round++)
        copy_and_check(a->c, a->seed * 100 + round, 8, 3 << 19);
    return NULL;
}

static void many_callers_at_once(void)
{
    enum { T = 12 };
    pthread_t th[T];
    arg a[T];
    gr_copier *c;

    ASSERT_STATUS(gr__copier_create(4, &c), GR_OK);
    for (int i = 0; i < T; i++) {
        a[i] = (arg){c, (uint64_t)i + 10};
        pthread_create(&th[i], NULL, copier_thread, &a[i]);
    }
    for (int i = 0; i < T; i++)
        pthread_join(th[i], NULL);
    gr__copier_destroy(c);
}

GR_TEST_MAIN(GR_TEST(copies_every_byte), GR_TEST(empty_copies_among_others),
             GR_TEST(no_helpers), GR_TEST(many_callers_at_once))
