/*
 * handle.c - the handle table (see handle.h).
 *
 * A handle is (generation << 32) | (slot + 1): never 0, so never NULL as a pointer. A slot's
 * `word` is its generation times two, plus one while it is live; new and release change it
 * under `mu` (they also keep the free list), lookups read it with acquire so that a
 * matching word guarantees the object pointer and kind stored before it are visible.
 *
 * fork(): `mu` is held across the fork (pthread_atfork, registered with the first handle),
 * so the child never inherits it locked by a parent thread that does not exist there: a
 * child may create a runtime of its own, which takes a handle.
 */
#include "runtime/handle.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "runtime/base/fault.h"

#define CHUNK_SLOTS 4096u
#define MAX_CHUNKS 4096u /* 2^24 slots */

_Static_assert(sizeof(uintptr_t) == 8, "handles pack 64 bits into a pointer");

typedef struct slot {
    _Atomic uint64_t word; /* generation * 2 + live */
    void *_Atomic obj;
    _Atomic uint32_t kind;
    uint32_t next_free; /* slot + 1 of the next free slot, 0 at the end; under mu */
} slot;

static slot *_Atomic chunks[MAX_CHUNKS];
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static uint32_t free_head; /* slot + 1, 0: none */
static uint32_t n_slots;   /* slots ever handed out */
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

static void lock_for_fork(void)
{
    pthread_mutex_lock(&mu);
}

static void unlock_after_fork(void)
{
    pthread_mutex_unlock(&mu);
}

static void register_atfork(void)
{
    pthread_atfork(lock_for_fork, unlock_after_fork, unlock_after_fork);
}

static slot *slot_at(uint32_t i)
{
    /* Acquire: pairs with the release that published the chunk. */
    slot *c = atomic_load_explicit(&chunks[i / CHUNK_SLOTS], memory_order_acquire);

    return c == NULL ? NULL : &c[i % CHUNK_SLOTS];
}

gr_status gr__handle_new(void *obj, gr_handle_kind kind, uintptr_t *out)
{
    uint64_t word;
    uint32_t i;
    slot *s;

    pthread_once(&atfork_once, register_atfork); /* before the first handle: see the top */
    pthread_mutex_lock(&mu);
    if (free_head != 0) {
        i = free_head - 1;
        s = slot_at(i);
        free_head = s->next_free;
    } else {
        if (n_slots == CHUNK_SLOTS * MAX_CHUNKS)
            goto out_full;
        i = n_slots;
        if (i % CHUNK_SLOTS == 0) {
            slot *c = gr__calloc(CHUNK_SLOTS, sizeof(*c));

            if (c == NULL)
                goto out_full;
            atomic_store_explicit(&chunks[i / CHUNK_SLOTS], c, memory_order_release);
        }
        n_slots++;
        s = slot_at(i);
    }
    atomic_store_explicit(&s->obj, obj, memory_order_relaxed);
    atomic_store_explicit(&s->kind, kind, memory_order_relaxed);
    /* Release: the object pointer and kind is visible to whoever sees the live word. */
    word = atomic_load_explicit(&s->word, memory_order_relaxed) + 1;
    atomic_store_explicit(&s->word, word, memory_order_release);
    pthread_mutex_unlock(&mu);
    *out = (uintptr_t)(((word >> 1) & 0xffffffffu) << 32 | (uint64_t)(i + 1));
    return GR_OK;

out_full:
    pthread_mutex_unlock(&mu);
    return GR_ERR_OUT_OF_MEMORY;
}

void *gr__handle_get(uintptr_t handle, gr_handle_kind kind)
{
    uint32_t i = (uint32_t)handle;
    uint64_t gen = (uint64_t)handle >> 32, word;
    slot *s;

    if (i == 0 || i > CHUNK_SLOTS * MAX_CHUNKS || (s = slot_at(i - 1)) == NULL)
        return NULL;
    word = atomic_load_explicit(&s->word, memory_order_acquire);
    if ((word & 1) == 0 || ((word >> 1) & 0xffffffffu) != gen ||
        atomic_load_explicit(&s->kind, memory_order_relaxed) != (uint32_t)kind)
        return NULL;
    return atomic_load_explicit(&s->obj, memory_order_relaxed);
}

void *gr__handle_get_ref(uintptr_t handle, gr_handle_kind kind, void (*ref)(void *obj))
{
    void *obj;

    pthread_mutex_lock(&mu);
    obj = gr__handle_get(handle, kind);
    if (obj != NULL)
        ref(obj);
    pthread_mutex_unlock(&mu);
    return obj;
}

bool gr__handle_release(uintptr_t handle)
{
    uint32_t i = (uint32_t)handle - 1;
    uint64_t word;
    slot *s = slot_at(i);

    pthread_mutex_lock(&mu);
    word = atomic_load_explicit(&s->word, memory_order_relaxed);
    if ((word & 1) == 0 || ((word >> 1) & 0xffffffffu) != (uint64_t)handle >> 32) {
        pthread_mutex_unlock(&mu); /* released already: the slot is free, or reused */
        return false;
    }
    /* The next generation, not live: no old handle of this slot matches again (until its
     * 32-bit generation wraps). */
    atomic_store_explicit(&s->word, word + 1, memory_order_release);
    atomic_store_explicit(&s->obj, NULL, memory_order_relaxed);
    s->next_free = free_head;
    free_head = i + 1;
    pthread_mutex_unlock(&mu);
    return true;
}
