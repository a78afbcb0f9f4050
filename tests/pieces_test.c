/*
 * pieces_test.c - the schedule of copies streamed through a staging buffer (pieces.h),
 * against a model of a device's copy queue that runs its copies in order, either as late as
 * it may (only when waited for) or as early (when queued): every byte lands where asked,
 * the direct copies are left alone, and a part of the staging buffer is never refilled by
 * the host while the device has still to read it (in), nor by the device while the host has
 * still to take it (out), nor read by the host before the device wrote it (out).
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/core/pieces.h"
#include "tests/testing.h"

enum { MAX_OPS = 4096, MAX_PARTS = 8 };

typedef struct op {
    bool out; /* a copy out: it writes its part */
    uint32_t part;
    void *dst;
    const void *src;
    uint64_t bytes;
} op;

/* The device's copy queue: ops[done .. n) queued and not run. */
typedef struct model {
    bool out;      /* copies out: the device writes the parts */
    bool eager;    /* runs each copy when queued */
    int fail_at;   /* the queue call (from 1) that fails; 0: none */
    op ops[MAX_OPS];
    uint32_t n, done, calls;
    bool unread[MAX_PARTS]; /* out: written by the device, not yet taken by the host */
    const unsigned char *staging;
    uint64_t part;
    uint32_t violations;
} model;

static void run_op(model *m)
{
    op *o = &m->ops[m->done++];

    if (o->out) {
        if (m->unread[o->part])
            m->violations++; /* the device overwrote a part the host had not taken */
        m->unread[o->part] = true;
    }
    memcpy(o->dst, o->src, o->bytes);
}

static int queue(void *ctx, uint32_t part, void *dst, const void *src, uint64_t bytes)
{
    model *m = ctx;

    if (++m->calls == (uint32_t)m->fail_at)
        return 7;
    ASSERT_TRUE(m->n < MAX_OPS && part < MAX_PARTS);
    m->ops[m->n++] = (op){m->out, part, dst, src, bytes};
    if (m->eager)
        run_op(m);
    return 0;
}

/* Runs the queue up to the last copy queued on the part. */
static int wait(void *ctx, uint32_t part)
{
    model *m = ctx;
    uint32_t last = m->done;

    for (uint32_t i = m->done; i < m->n; i++)
        if (m->ops[i].part == part)
            last = i + 1;
    while (m->done < last)
        run_op(m);
    return 0;
}

static void host_copy(void *ctx, void *dst, const void *src, uint64_t bytes)
{
    model *m = ctx;
    const unsigned char *p = m->out ? src : dst; /* the staging side */
    uint32_t part = (uint32_t)((p - m->staging) / m->part);

    for (uint32_t i = m->done; i < m->n; i++)
        if (m->ops[i].part == part)
            m->violations++; /* in: refilled before read; out: read before written or
                                before an earlier copy in read it */
    if (m->out) {
        if (!m->unread[part])
            m->violations++;
        m->unread[part] = false;
    }
    memcpy(dst, src, bytes);
}

static void fill(unsigned char *p, uint64_t n, uint64_t seed)
{
    for (uint64_t i = 0; i < n; i++)
        p[i] = (unsigned char)(gr_test_rand(&seed) >> 56);
}

/* Copies of `sizes` (n of them) one way, with `direct` left out, through `parts` parts of
 * `part` bytes: each moved byte where asked, each direct copy's destination untouched. */
static void one_way(bool out, bool eager, uint32_t parts, uint64_t part, const uint64_t *sizes,
                    uint32_t n, uint64_t direct)
{
    static model m;
    uint64_t total = 0, off = 0;
    unsigned char *from, *to, *staging = malloc(parts * part);
    gr_copy list[16];
    gr_piece_ops ops = {&m, queue, wait, host_copy};

    for (uint32_t i = 0; i < n; i++)
        total += sizes[i];
    from = malloc(total + 1);
    to = malloc(total + 1);
    fill(from, total, total + parts);
    memset(to, 0x5a, total + 1);
    memset(&m, 0, sizeof(m));
    m.out = out;
    m.eager = eager;
    m.staging = staging;
    m.part = part;
    for (uint32_t i = 0; i < n; off += sizes[i++])
        list[i] = (gr_copy){to + off, from + off, sizes[i]};
    if (out)
        ASSERT_EQ(gr__pieces_out(&ops, staging, part, parts, list, n, direct), 0);
    else
        ASSERT_EQ(gr__pieces_in(&ops, staging, part, parts, list, n, direct), 0);
    while (m.done < m.n) /* in: what the device still had queued */
        run_op(&m);
    ASSERT_EQ(m.violations, 0);
    off = 0;
    for (uint32_t i = 0; i < n; off += sizes[i++]) {
        bool left = (direct >> i) & 1;

        for (uint64_t b = 0; b < sizes[i]; b++)
            if (to[off + b] != (left ? 0x5a : from[off + b]))
                GR_TEST_FAIL("%s, copy %u byte %llu: %s", out ? "out" : "in", i,
                             (unsigned long long)b, left ? "a direct copy was moved" : "wrong");
    }
    ASSERT_EQ(to[total], 0x5a);
    free(from);
    free(to);
    free(staging);
}

/* Sizes around the part's and around the parts' sum, empty copies among them, the direct
 * ones skipped, with every number of parts from one to four, late and early. */
static void every_byte_where_asked_and_parts_never_reused_early(void)
{
    enum { P = 4096 };
    static const uint64_t sizes[] = {0, 1, P - 1, P, P + 1, 10 * P + 3, 0, 3 * P, 7};
    uint32_t n = sizeof(sizes) / sizeof(sizes[0]);

    for (uint32_t parts = 1; parts <= 4; parts++)
        for (int mode = 0; mode < 4; mode++) {
            bool out = mode & 1, eager = mode & 2;

            one_way(out, eager, parts, P, sizes, n, 0);
            one_way(out, eager, parts, P, sizes, n, (1u << 3) | (1u << 5));
            one_way(out, eager, parts, P, &sizes[5], 1, 0);  /* one copy of many pieces */
            one_way(out, eager, parts, P, &sizes[5], 1, 1);  /* all direct: nothing moves */
            one_way(out, eager, parts, P, sizes, 1, 0);      /* one empty copy */
        }
}

/* Out returns with no copy on a part still running, in or out, even when nothing goes out
 * through the staging buffer: the worker hands it to its next unit then. */
static void out_leaves_no_copy_running_on_the_parts(void)
{
    static model m;
    enum { P = 4096, N = 10 * P };
    unsigned char *from = calloc(N, 1), *dev = calloc(N, 1), *back = calloc(N, 1);
    unsigned char *staging = malloc(4 * P);
    gr_copy in = {dev, from, N}, out = {back, dev, N};
    gr_piece_ops ops = {&m, queue, wait, host_copy};

    for (int direct_out = 0; direct_out < 2; direct_out++) {
        memset(&m, 0, sizeof(m));
        m.staging = staging;
        m.part = P;
        ASSERT_EQ(gr__pieces_in(&ops, staging, P, 4, &in, 1, 0), 0);
        ASSERT_TRUE(m.done < m.n); /* the model runs copies only when waited for */
        m.out = true;
        ASSERT_EQ(gr__pieces_out(&ops, staging, P, 4, &out, 1, (uint64_t)direct_out), 0);
        ASSERT_EQ(m.done, m.n);
        ASSERT_EQ(m.violations, 0);
    }
    free(from);
    free(dev);
    free(back);
    free(staging);
}

/* A failed queue call is returned as it is, and nothing is queued after it. */
static void a_failure_is_returned(void)
{
    static model m;
    enum { P = 4096, N = 10 * P };
    unsigned char *from = calloc(N, 1), *to = calloc(N, 1), *staging = malloc(4 * P);
    gr_copy c = {to, from, N};
    gr_piece_ops ops = {&m, queue, wait, host_copy};

    for (int out = 0; out < 2; out++) {
        memset(&m, 0, sizeof(m));
        m.out = out;
        m.staging = staging;
        m.part = P;
        m.fail_at = 6;
        ASSERT_EQ(out ? gr__pieces_out(&ops, staging, P, 4, &c, 1, 0)
                      : gr__pieces_in(&ops, staging, P, 4, &c, 1, 0),
                  7);
        ASSERT_EQ(m.calls, 6);
        ASSERT_EQ(m.n, 5);
    }
    free(from);
    free(to);
    free(staging);
}

GR_TEST_MAIN(GR_TEST(every_byte_where_asked_and_parts_never_reused_early),
             GR_TEST(out_leaves_no_copy_running_on_the_parts), GR_TEST(a_failure_is_returned))
