/*
 * units_test.c - the unit planner (runtime/units.c): when tensors stay whole, how large
 * ones are chunked and small ones batched, which units are staged, and that every element
 * of every tensor is covered exactly once, in order.
 */
#include "graph/graph.h"
#include "runtime/hostcache.h"
#include "runtime/units.h"
#include "tests/testing.h"

/* What the planner is told of host memory: all of it page-locked, or none. */
static const gr_backend_env *const always_ready = &gr__units_all_ready,
                               *const never_ready = &gr__units_none_ready;

static float dummy[1];

static gr_tensor *tensors_of(const uint64_t *elems, uint64_t count)
{
    gr_tensor *t = calloc(count, sizeof(*t));

    for (uint64_t i = 0; i < count; i++)
        t[i] = (gr_tensor){{dummy}, {dummy}, elems[i], 0, {0}};
    return t;
}

/* Every tensor's elements covered once, in order, by units that respect the limits. */
static void check_cover(const gr_unit *u, uint64_t n_units, const gr_tensor *t, uint64_t count,
                        const uint32_t *pending, const gr_unit_limits *lim)
{
    uint64_t next_index = 0, next_offset = 0;
    uint32_t *seen = calloc(count, sizeof(*seen));

    for (uint64_t k = 0; k < n_units; k++) {
        ASSERT_GT(u[k].tensors, 0);
        ASSERT_LE(u[k].tensors, GR_UNIT_MAX_TENSORS);
        ASSERT_EQ_U64(u[k].index, next_index);
        ASSERT_EQ_U64(u[k].offset, next_offset);
        ASSERT_LE_U64(u[k].elems, u[k].staged ? lim->stage_elems : lim->max_elems);
        if (u[k].tensors == 1) { /* a chunk, or a whole tensor */
            seen[u[k].index]++;
            next_offset += u[k].elems;
            ASSERT_LE_U64(next_offset, t[u[k].index].elems);
            if (next_offset == t[u[k].index].elems) {
                next_index++;
                next_offset = 0;
            }
        } else { /* a batch of whole small tensors: direct only when back to back (a
                  * scattered one is copied tensor by tensor); medium ones in a scattered
                  * batch, or in a staged one when two fit the staging buffer */
            uint64_t sum = 0, below = lim->batch_below;

            if (u[k].scattered && lim->scatter_below > below)
                below = lim->scatter_below;
            if (u[k].staged && lim->stage_elems / 4 + 1 > below)
                below = lim->stage_elems / 4 + 1;
            for (uint32_t j = 0; j < u[k].tensors; j++) {
                const gr_tensor *x = &t[u[k].index + j];
                ASSERT_LT(x->elems, below);
                if (!u[k].staged && !u[k].scattered && j > 0)
                    ASSERT_PTR_EQ(x->in[0], (const float *)x[-1].in[0] + x[-1].elems);
                sum += t[u[k].index + j].elems;
                seen[u[k].index + j]++;
            }
            ASSERT_EQ_U64(u[k].elems, sum);
            next_index += u[k].tensors;
        }
    }
    ASSERT_EQ_U64(next_index, count);
    for (uint64_t i = 0; i < count; i++)
        ASSERT_EQ(seen[i], pending[i]);
    free(seen);
}

static gr_graph *seed_graph(void)
{
    gr_graph *g;

    ASSERT_STATUS(gr_graph_create_seed(&g), GR_OK);
    return g;
}

static void limits(void)
{
    gr_graph *g = seed_graph();
    gr_unit_limits lim;

    /* 1 buffer; arena 3 MiB over 3 workers: 1 MiB each = 262144 elements. */
    lim = gr__unit_limits(g, 3 << 20, 3, 64 << 20, 1 << 20, 0);
    ASSERT_EQ_U64(lim.max_elems, 262144);
    ASSERT_EQ_U64(lim.stage_elems, 262144); /* staging (8M per port) capped by the share */
    ASSERT_EQ_U64(lim.batch_below, 262144);
    lim = gr__unit_limits(g, 1ull << 30, 2, 8 << 20, 64 << 10, 0);
    ASSERT_EQ_U64(lim.max_elems, (512ull << 20) / 4);
    ASSERT_EQ_U64(lim.stage_elems, 1 << 20); /* 8 MiB over 2 ports */
    ASSERT_EQ_U64(lim.batch_below, 16384);
    ASSERT_EQ_U64(lim.pipe_elems, lim.max_elems); /* no pipelining size: the share */
    /* 128 MiB of host bytes (in and out, 8 per element): chunks of 16 Mi elements, under
     * the share of 128 Mi; a pipelining size above the share changes nothing. */
    lim = gr__unit_limits(g, 1ull << 30, 2, 8 << 20, 64 << 10, 128ull << 20);
    ASSERT_EQ_U64(lim.pipe_elems, 16ull << 20);
    lim = gr__unit_limits(g, 3 << 20, 3, 64 << 20, 1 << 20, 128ull << 20);
    ASSERT_EQ_U64(lim.pipe_elems, 262144);
    /* A share too small for one aligned element group: the whole arena. */
    lim = gr__unit_limits(g, 512, 4, 4096, 0, 0);
    ASSERT_EQ_U64(lim.max_elems, 128);
    gr_graph_destroy(g);
}

static void stays_whole_when_everything_fits(void)
{
    const uint64_t elems[] = {1000, 5000, 262144};
    gr_graph *g = seed_graph();
    gr_tensor *t = tensors_of(elems, 3);
    gr_unit_limits lim = {262144, 262144, 262144, 1000, false, 0, 0, 0, 0, 1};
    gr_unit *u;
    uint32_t *pending;
    uint64_t n;

    ASSERT_STATUS(gr__units_plan(g, t, 3, &lim, always_ready, NULL, &u, &n, &pending), GR_OK);
    ASSERT_PTR_EQ(u, NULL); /* identity: unit k is tensor k */
    ASSERT_PTR_EQ(pending, NULL);
    ASSERT_EQ_U64(n, 3);
    gr_graph_destroy(g);
    free(t);
}

static void unsplittable_graph_stays_whole(void)
{
    const char *x = "x";
    const float two = 2;
    const uint64_t elems[] = {10, 1u << 30};
    gr_tensor *t = tensors_of(elems, 2);
    gr_unit_limits lim = {100, 100, 100, 50, false, 0, 0, 0, 0, 1};
    gr_unit *u;
    uint32_t *pending;
    uint64_t n;
    gr_graph *g;

    ASSERT_STATUS(gr_graph_create(&g), GR_OK);
    ASSERT_STATUS(gr_graph_add_buffer(g, "x", 1, 1), GR_OK);
    ASSERT_STATUS(gr_graph_add_buffer(g, "w", 2, 1), GR_OK);
    ASSERT_STATUS(gr_graph_add_h2d(g, "l", 0, "x"), GR_OK);
    ASSERT_STATUS(gr_graph_add_kernel(g, "k", "mul", &x, 1, "w", &two, 1), GR_OK);
    ASSERT_STATUS(gr_graph_add_d2h(g, "s", "w", 0), GR_OK);
    ASSERT_STATUS(gr_graph_add_dep(g, "l", "k"), GR_OK);
    ASSERT_STATUS(gr_graph_add_dep(g, "k", "s"), GR_OK);
    ASSERT_STATUS(gr_graph_finalize(g), GR_OK);
    ASSERT_STATUS(gr__units_plan(g, t, 2, &lim, never_ready, NULL, &u, &n, &pending), GR_OK);
    ASSERT_PTR_EQ(u, NULL);
    ASSERT_EQ_U64(n, 2);
    gr_graph_destroy(g);
    free(t);
}

/* A tensor that fits a worker's share but is above the pipelining size is cut into even
 * direct chunks of at most that size; one at or below it stays whole. */
static void pipelined_chunks_of_tensors_that_fit(void)
{
    const uint64_t elems[] = {1000, 250, 2501};
    gr_graph *g = seed_graph();
    gr_tensor *t = tensors_of(elems, 3);
    gr_unit_limits lim = {100000, 250, 250, 10, false, 0, 0, 0, 0, 1};
    gr_unit *u;
    uint32_t *pending;
    uint64_t n;

    ASSERT_STATUS(gr__units_plan(g, t, 3, &lim, always_ready, NULL, &u, &n, &pending), GR_OK);
    ASSERT_EQ_U64(n, 4 + 1 + 11);
    ASSERT_EQ(pending[0], 4);
    ASSERT_EQ(pending[1], 1);
    ASSERT_EQ(pending[2], 11);
    for (uint64_t k = 0; k < n; k++) {
        ASSERT_TRUE(!u[k].staged);
        ASSERT_EQ(u[k].tensors, 1);
        ASSERT_LE_U64(u[k].elems, 250);
        ASSERT_GE_U64(u[k].elems, 227); /* even: 2501 / 11 */
    }
    ASSERT_EQ_U64(u[4].index, 1);
    ASSERT_EQ_U64(u[4].elems, 250);
    free(u);
    free(pending);
    gr_graph_destroy(g);
    free(t);
}

static void large_tensors_are_chunked_evenly(void)
{
    const uint64_t elems[] = {1000, 1001, 3000};
    gr_graph *g = seed_graph();
    gr_tensor *t = tensors_of(elems, 3);
    gr_unit_limits lim = {400, 400, 400, 10, false, 0, 0, 0, 0, 1};
    gr_unit *u;
    uint32_t *pending;
    uint64_t n;

    ASSERT_STATUS(gr__units_plan(g, t, 3, &lim, always_ready, NULL, &u, &n, &pending), GR_OK);
    ASSERT_TRUE(u != NULL);
    /* ceil(1000/400) = 3, ceil(1001/400) = 3, ceil(3000/400) = 8. */
    ASSERT_EQ_U64(n, 14);
    ASSERT_EQ(pending[0], 3);
    ASSERT_EQ(pending[1], 3);
    ASSERT_EQ(pending[2], 8);
    ASSERT_EQ_U64(u[0].elems, 333); /* even chunks: 333, 333, 334 */
    ASSERT_EQ_U64(u[2].elems, 334);
    for (uint64_t k = 0; k < n; k++)
        ASSERT_TRUE(!u[k].staged); /* DMA-ready memory goes direct */
    check_cover(u, n, t, 3, pending, &lim);
    free(u);
    free(pending);
    gr_graph_destroy(g);
    free(t);
}

/* gr_job_options.cut_elems: with runs of 7 elements (rows of a function of whole rows),
 * the limits are whole runs and every chunk, direct or staged, starts and ends on one: no
 * call of the kernel sees part of a row. Tensors that fit stay whole; small ones are
 * batched whole, as before. */
static void chunks_fall_on_whole_runs(void)
{
    const uint64_t elems[] = {7 * 1000, 7 * 37, 7, 7 * 301};
    gr_graph *g = seed_graph();
    gr_tensor *t = tensors_of(elems, 4);
    gr_unit_limits lim = {400, 400, 250, 10, false, 0, 0, 0, 0, 1};
    gr_unit *u;
    uint32_t *pending;
    uint64_t n;

    gr__unit_limits_cut(&lim, 7);
    ASSERT_EQ_U64(lim.max_elems, 399);
    ASSERT_EQ_U64(lim.pipe_elems, 399);
    ASSERT_EQ_U64(lim.stage_elems, 245);
    for (int ready = 0; ready < 2; ready++) {
        ASSERT_STATUS(gr__units_plan(g, t, 4, &lim, ready ? always_ready : never_ready, NULL,
                                     &u, &n, &pending),
                      GR_OK);
        /* ceil(7000 / 399) = 18 direct chunks, or ceil(7000 / 245) = 29 staged ones. */
        ASSERT_EQ(pending[0], ready ? 18 : 29);
        for (uint64_t k = 0; k < n; k++) {
            ASSERT_EQ_U64(u[k].offset % 7, 0);
            ASSERT_EQ_U64(u[k].elems % 7, 0);
            ASSERT_LE_U64(u[k].elems, ready ? 399 : 245);
        }
        check_cover(u, n, t, 4, pending, &lim);
        free(u);
        free(pending);
    }
    /* A limit below one run: units of one run each. */
    lim = (gr_unit_limits){5, 5, 5, 2, false, 0, 0, 0, 0, 1};
    gr__unit_limits_cut(&lim, 7);
    ASSERT_EQ_U64(lim.max_elems, 7);
    ASSERT_EQ_U64(lim.stage_elems, 7);
    ASSERT_STATUS(gr__units_plan(g, t, 1, &lim, always_ready, NULL, &u, &n, &pending), GR_OK);
    ASSERT_EQ_U64(n, 1000);
    for (uint64_t k = 0; k < n; k++)
        ASSERT_TRUE(u[k].offset == 7 * k && u[k].elems == 7);
    free(u);
    free(pending);
    gr_graph_destroy(g);
    free(t);
}

static void pageable_tensors_are_staged_to_the_staging_limit(void)
{
    const uint64_t elems[] = {300, 1000};
    gr_graph *g = seed_graph();
    gr_tensor *t = tensors_of(elems, 2);
    gr_unit_limits lim = {1000, 1000, 250, 10, false, 0, 0, 0, 0, 1};
    gr_unit *u;
    uint32_t *pending;
    uint64_t n;

    ASSERT_STATUS(gr__units_plan(g, t, 2, &lim, never_ready, NULL, &u, &n, &pending), GR_OK);
    ASSERT_EQ_U64(n, 2 + 4); /* 300 in 2 staged chunks, 1000 in 4 */
    for (uint64_t k = 0; k < n; k++)
        ASSERT_TRUE(u[k].staged);
    check_cover(u, n, t, 2, pending, &lim);
    free(u);
    free(pending);
    gr_graph_destroy(g);
    free(t);
}

/* Medium tensors in pageable memory are gathered together into staged units of at most
 * half the staging buffer, rather than staged one per unit; one of more than a quarter of
 * it stays alone (chunked to the staging limit). */
static void pageable_medium_tensors_share_staged_units(void)
{
    const uint64_t elems[] = {250, 250, 250, 250, 250, 600, 250, 350, 100};
    enum { N = sizeof(elems) / sizeof(elems[0]) };
    gr_graph *g = seed_graph();
    gr_tensor *t = tensors_of(elems, N);
    gr_unit_limits lim = {1 << 20, 1 << 20, 2000, 64, false, 0, 0, 0, 0, 1};
    gr_unit *u;
    uint32_t *pending;
    uint64_t n;

    ASSERT_STATUS(gr__units_plan(g, t, N, &lim, never_ready, NULL, &u, &n, &pending), GR_OK);
    /* 4 x 250 (half of 2000) | 250 | 600 alone (over a quarter) | 250 + 350 + 100 */
    ASSERT_EQ_U64(n, 4);
    ASSERT_EQ_U64(u[0].tensors, 4);
    ASSERT_EQ_U64(u[1].tensors, 1);
    ASSERT_EQ_U64(u[1].index, 4);
    ASSERT_EQ_U64(u[2].tensors, 1);
    ASSERT_EQ_U64(u[2].elems, 600);
    ASSERT_EQ_U64(u[3].tensors, 3);
    for (uint64_t k = 0; k < n; k++)
        ASSERT_TRUE(u[k].staged);
    check_cover(u, n, t, N, pending, &lim);
    free(u);
    free(pending);
    gr_graph_destroy(g);
    free(t);
}

/* A short job of many tensors is batched into at least `spread` units (none under
 * spread_floor), so that its workers overlap; a long one, and one tensor, as before. */
static void short_jobs_spread_over_the_workers(void)
{
    enum { N = 100 };
    uint64_t elems[N];
    gr_graph *g = seed_graph();
    gr_tensor *t;
    gr_unit_limits lim = {1 << 20, 1 << 20, 1 << 20, 64, true, 1 << 20, 16, 12, 100, 1};
    gr_unit *u;
    uint32_t *pending;
    uint64_t n;

    for (int i = 0; i < N; i++)
        elems[i] = 1000;
    t = tensors_of(elems, N);
    ASSERT_STATUS(gr__units_plan(g, t, N, &lim, always_ready, NULL, &u, &n, &pending), GR_OK);
    check_cover(u, n, t, N, pending, &lim);
    ASSERT_EQ_U64(n, 13); /* 100000 / 12 = 8333 elements a unit: 8 tensors, 12 x 8 + 4 */
    ASSERT_EQ_U64(u[0].tensors, 8);
    free(u);
    free(pending);
    /* One tensor is not chunked finer for it (a chunk more is a part more that a shutdown
     * can stop once the tensor started): one unit, as the pipelining size says. */
    t[0].elems = 120000;
    ASSERT_STATUS(gr__units_plan(g, t, 1, &lim, always_ready, NULL, &u, &n, &pending), GR_OK);
    ASSERT_EQ_U64(n, 1);
    free(u);
    free(pending);
    /* The floor: no unit under spread_floor elements (10 x 1000 in 12 would be 833). */
    lim.spread_floor = 3000;
    t[0].elems = 1000;
    ASSERT_STATUS(gr__units_plan(g, t, 10, &lim, always_ready, NULL, &u, &n, &pending), GR_OK);
    check_cover(u, n, t, 10, pending, &lim);
    ASSERT_EQ_U64(n, 4); /* 3 + 3 + 3 + 1 */
    free(u);
    free(pending);
    gr_graph_destroy(g);
    free(t);
}

/* With the registration cache, a batch the DMA engine takes as it lies holds only tensors
 * that lie alike (env->host_class): all inside entries the job holds registered (one entry
 * for a direct batch) or all outside the cache; one that lies otherwise starts a batch. */
static float slab8[8 * 16];

static int class_of(const gr_backend_env *env, const struct gr_host_hold *hold, const void *p,
                    uint64_t bytes, uintptr_t *key)
{
    long i = ((const float *)p - slab8) / 16;

    (void)env, (void)hold, (void)bytes;
    *key = i < 2 ? 1 : i < 4 ? 2 : 0; /* tensors 0-1 in entry 1, 2-3 in entry 2 */
    return i < 4 ? GR_HOST_HELD : i < 6 ? GR_HOST_OUTSIDE : GR_HOST_OTHER;
}

/* As the runtime's host_ready answers: DMA-ready unless it lies otherwise. */
static bool ready_by_class(const gr_backend_env *env, const struct gr_host_hold *hold,
                           const void *p, uint64_t bytes)
{
    uintptr_t key;

    return class_of(env, hold, p, bytes, &key) != GR_HOST_OTHER;
}

static void batches_lie_alike_with_the_cache(void)
{
    const gr_backend_env env = {.host_ready = ready_by_class, .host_class = class_of};
    gr_unit_limits lim = {1 << 20, 1 << 20, 1 << 20, 64, false, 0, 0, 0, 0, 1};
    gr_graph *g = seed_graph();
    gr_tensor t[8];
    gr_unit *u;
    uint32_t *pending;
    uint64_t n;

    for (int i = 0; i < 8; i++) /* back to back: one direct batch without the cache */
        t[i] = (gr_tensor){{slab8 + 16 * i}, {slab8 + 16 * i}, 16, 0, {0}};
    ASSERT_STATUS(gr__units_plan(g, t, 8, &lim, &env, NULL, &u, &n, &pending), GR_OK);
    check_cover(u, n, t, 8, pending, &lim);
    /* entry 1 | entry 2 | outside | the rest, lying otherwise: staged together */
    ASSERT_EQ_U64(n, 4);
    ASSERT_EQ_U64(u[0].tensors, 2);
    ASSERT_TRUE(!u[0].staged && !u[0].scattered);
    ASSERT_EQ_U64(u[1].index, 2);
    ASSERT_EQ_U64(u[2].index, 4);
    ASSERT_EQ_U64(u[3].index, 6);
    ASSERT_TRUE(u[3].staged && u[3].tensors == 2);
    free(u);
    free(pending);
    gr_graph_destroy(g);
}

static void small_tensors_are_batched(void)
{
    enum { N = 10000 };
    uint64_t elems[N], rng = 3;
    gr_graph *g = seed_graph();
    gr_tensor *t;
    gr_unit_limits lim = {1 << 20, 1 << 20, 2000, 64, false, 0, 0, 0, 0, 1};
    gr_unit *u;
    uint32_t *pending;
    uint64_t n;

    for (int i = 0; i < N; i++)
        elems[i] = 1 + gr_test_below(&rng, 63);
    t = tensors_of(elems, N);
    ASSERT_STATUS(gr__units_plan(g, t, N, &lim, always_ready, NULL, &u, &n, &pending), GR_OK);
    ASSERT_LT(n, N / 30); /* about 60 tensors per batch of 2000 elements */
    check_cover(u, n, t, N, pending, &lim);
    for (uint64_t k = 0; k + 1 < n; k++) /* a batch ends only when the next would overflow */
        ASSERT_GT(u[k].elems + t[u[k + 1].index].elems, lim.stage_elems);
    free(u);
    free(pending);
    free(t);

    /* One-element tensors: a batch ends at GR_UNIT_MAX_TENSORS. */
    for (int i = 0; i < N; i++)
        elems[i] = 1;
    t = tensors_of(elems, N);
    lim.stage_elems = 1 << 20;
    ASSERT_STATUS(gr__units_plan(g, t, N, &lim, always_ready, NULL, &u, &n, &pending), GR_OK);
    ASSERT_EQ_U64(n, (N + GR_UNIT_MAX_TENSORS - 1) / GR_UNIT_MAX_TENSORS);
    ASSERT_EQ(u[0].tensors, GR_UNIT_MAX_TENSORS);
    check_cover(u, n, t, N, pending, &lim);
    free(u);
    free(pending);
    free(t);
    gr_graph_destroy(g);
}

/* With a backend that copies many ranges at once, a batch of tensors apart in DMA-ready
 * memory is scattered (not staged); in pageable memory it is still staged; lying back to
 * back it is still one direct range. */
static void separate_batches_scattered_where_the_backend_can(void)
{
    enum { N = 300 };
    uint64_t elems[N];
    float *block = calloc(N * 8, sizeof(float));
    gr_graph *g = seed_graph();
    gr_unit_limits lim = {1 << 20, 1 << 20, 2000, 64, true, 0, 0, 0, 0, 1};
    gr_tensor *t;
    gr_unit *u;
    uint32_t *pending;
    uint64_t n;

    for (int i = 0; i < N; i++)
        elems[i] = 1 + i % 7;
    t = tensors_of(elems, N); /* every tensor at `dummy`: apart from the one before */
    ASSERT_STATUS(gr__units_plan(g, t, N, &lim, always_ready, NULL, &u, &n, &pending), GR_OK);
    check_cover(u, n, t, N, pending, &lim);
    for (uint64_t k = 0; k < n; k++)
        ASSERT_TRUE(u[k].scattered && !u[k].staged);
    free(u);
    free(pending);
    ASSERT_STATUS(gr__units_plan(g, t, N, &lim, never_ready, NULL, &u, &n, &pending), GR_OK);
    for (uint64_t k = 0; k < n; k++)
        ASSERT_TRUE(u[k].staged && !u[k].scattered);
    free(u);
    free(pending);
    for (int i = 0; i < N; i++) { /* back to back in one block */
        t[i].in[0] = t[i].out[0] = block + 8 * i;
        t[i].elems = 8;
    }
    ASSERT_STATUS(gr__units_plan(g, t, N, &lim, always_ready, NULL, &u, &n, &pending), GR_OK);
    for (uint64_t k = 0; k < n; k++)
        ASSERT_TRUE(!u[k].staged && !u[k].scattered);
    free(u);
    free(pending);
    free(t);
    free(block);
    gr_graph_destroy(g);
}

/* Medium tensors (batch_below <= n < scatter_below) in DMA-ready memory are batched and
 * scattered; in pageable memory they are gathered into staged batches; tensors under
 * scatter_from apart in DMA-ready memory are staged, not scattered. */
static void medium_tensors_batched_small_ones_staged(void)
{
    enum { N = 100 };
    uint64_t elems[N];
    gr_graph *g = seed_graph();
    gr_unit_limits lim = {1 << 20, 1 << 20, 1 << 20, 64, true, 4096, 16, 0, 0, 1};
    gr_tensor *t;
    gr_unit *u;
    uint32_t *pending;
    uint64_t n;

    for (int i = 0; i < N; i++)
        elems[i] = 1000 + i;
    t = tensors_of(elems, N);
    ASSERT_STATUS(gr__units_plan(g, t, N, &lim, always_ready, NULL, &u, &n, &pending), GR_OK);
    check_cover(u, n, t, N, pending, &lim);
    ASSERT_EQ_U64(n, 1); /* one batch of 100 */
    ASSERT_TRUE(u[0].scattered && u[0].tensors == N);
    free(u);
    free(pending);
    ASSERT_STATUS(gr__units_plan(g, t, N, &lim, never_ready, NULL, &u, &n, &pending), GR_OK);
    check_cover(u, n, t, N, pending, &lim);
    ASSERT_EQ_U64(n, 1); /* gathered together into one staged unit */
    ASSERT_TRUE(u[0].tensors == N && u[0].staged);
    free(u);
    free(pending);
    for (int i = 0; i < N; i++)
        t[i].elems = 1 + i % 15; /* under scatter_from */
    ASSERT_STATUS(gr__units_plan(g, t, N, &lim, always_ready, NULL, &u, &n, &pending), GR_OK);
    for (uint64_t k = 0; k < n; k++)
        ASSERT_TRUE(u[k].staged && !u[k].scattered);
    free(u);
    free(pending);
    /* A scattered batch does not take in tensors under scatter_from: they start a staged
     * batch of their own. */
    for (int i = 0; i < N; i++)
        t[i].elems = i < N / 2 ? 1000 : 5;
    ASSERT_STATUS(gr__units_plan(g, t, N, &lim, always_ready, NULL, &u, &n, &pending), GR_OK);
    check_cover(u, n, t, N, pending, &lim);
    ASSERT_EQ_U64(n, 2);
    ASSERT_TRUE(u[0].scattered && u[0].tensors == N / 2);
    ASSERT_TRUE(u[1].staged && u[1].tensors == N / 2);
    free(u);
    free(pending);
    free(t);
    gr_graph_destroy(g);
}

/* batch_below 0 is gr_config's "never batch": medium tensors are not packed either, in
 * DMA-ready memory (scattered batches) or pageable (gathered ones): each is its own unit. */
static void never_batch_means_never(void)
{
    enum { N = 40 };
    uint64_t elems[N];
    gr_graph *g = seed_graph();
    gr_unit_limits lim = {1 << 20, 1 << 20, 1 << 20, 0, true, 4096, 16, 0, 0, 1};
    const gr_backend_env *envs[] = {always_ready, never_ready};
    gr_tensor *t;

    for (int i = 0; i < N; i++)
        elems[i] = 1000 + i;
    t = tensors_of(elems, N);
    for (int k = 0; k < 2; k++) {
        gr_unit *u;
        uint32_t *pending;
        uint64_t n;

        ASSERT_STATUS(gr__units_plan(g, t, N, &lim, envs[k], NULL, &u, &n, &pending), GR_OK);
        if (u != NULL) { /* staged (pageable): one unit a tensor, nothing packed */
            check_cover(u, n, t, N, pending, &lim);
            ASSERT_EQ_U64(n, N);
            for (uint64_t j = 0; j < n; j++)
                ASSERT_EQ_U64(u[j].tensors, 1);
        } else { /* DMA-ready: every tensor one direct unit, as given */
            ASSERT_EQ_U64(n, N);
        }
        free(u);
        free(pending);
    }
    free(t);
    gr_graph_destroy(g);
}

static void mixed_sizes_keep_order(void)
{
    const uint64_t elems[] = {5, 7, 900, 3, 3, 3, 50, 2000, 1};
    gr_graph *g = seed_graph();
    gr_tensor *t = tensors_of(elems, 9);
    gr_unit_limits lim = {500, 500, 500, 40, false, 0, 0, 0, 0, 1};
    gr_unit *u;
    uint32_t *pending;
    uint64_t n;

    ASSERT_STATUS(gr__units_plan(g, t, 9, &lim, always_ready, NULL, &u, &n, &pending), GR_OK);
    /* [5,7] batch, 900 in 2 chunks, [3,3,3] batch, 50 whole, 2000 in 4 chunks, [1] batch. */
    ASSERT_EQ_U64(n, 1 + 2 + 1 + 1 + 4 + 1);
    ASSERT_EQ(u[0].tensors, 2);
    ASSERT_EQ(u[3].tensors, 3);
    ASSERT_EQ_U64(u[4].index, 6);
    ASSERT_TRUE(!u[4].staged);
    check_cover(u, n, t, 9, pending, &lim);
    free(u);
    free(pending);
    gr_graph_destroy(g);
    free(t);
}

/* Tensors back to back in one DMA-ready allocation form a direct batch; a gap stages it. */
static void contiguous_batches_go_direct(void)
{
    enum { N = 100 };
    static float slab[N * 10 + 1];
    gr_tensor t[N];
    gr_graph *g = seed_graph();
    gr_unit_limits lim = {1 << 20, 1 << 20, 1 << 20, 64, false, 0, 0, 0, 0, 1};
    gr_unit *u;
    uint32_t *pending;
    uint64_t n;

    for (int i = 0; i < N; i++)
        t[i] = (gr_tensor){{slab + 10 * i}, {slab + 10 * i}, 10, 0, {0}};
    ASSERT_STATUS(gr__units_plan(g, t, N, &lim, always_ready, NULL, &u, &n, &pending), GR_OK);
    ASSERT_EQ_U64(n, 1);
    ASSERT_TRUE(!u[0].staged);
    ASSERT_EQ_U64(u[0].elems, N * 10);
    free(u);
    free(pending);
    ASSERT_STATUS(gr__units_plan(g, t, N, &lim, never_ready, NULL, &u, &n, &pending), GR_OK);
    ASSERT_TRUE(u[0].staged); /* pageable: staged */
    free(u);
    free(pending);
    t[50] = (gr_tensor){{slab + 501}, {slab + 501}, 9, 0, {0}}; /* a gap after tensor 49 */
    ASSERT_STATUS(gr__units_plan(g, t, N, &lim, always_ready, NULL, &u, &n, &pending), GR_OK);
    ASSERT_EQ_U64(n, 1);
    ASSERT_TRUE(u[0].staged);
    check_cover(u, n, t, N, pending, &lim);
    free(u);
    free(pending);
    gr_graph_destroy(g);
}

GR_TEST_MAIN(GR_TEST(limits), GR_TEST(contiguous_batches_go_direct),
             GR_TEST(stays_whole_when_everything_fits),
             GR_TEST(unsplittable_graph_stays_whole), GR_TEST(large_tensors_are_chunked_evenly),
             GR_TEST(pipelined_chunks_of_tensors_that_fit), GR_TEST(chunks_fall_on_whole_runs),
             GR_TEST(pageable_tensors_are_staged_to_the_staging_limit),
             GR_TEST(pageable_medium_tensors_share_staged_units),
             GR_TEST(short_jobs_spread_over_the_workers),
             GR_TEST(batches_lie_alike_with_the_cache), GR_TEST(small_tensors_are_batched),
             GR_TEST(separate_batches_scattered_where_the_backend_can),
             GR_TEST(medium_tensors_batched_small_ones_staged),
             GR_TEST(never_batch_means_never), GR_TEST(mixed_sizes_keep_order))
