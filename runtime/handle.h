/*
 * handle.h - generational handles: what gr_job_submit gives the caller instead of a pointer,
 * so that a handle used after its job was freed is recognized (GR_ERR_INVALID_USAGE) rather
 * than read through freed memory.
 *
 * A handle packs a slot number and the slot's generation; freeing the object bumps the
 * generation, so the stale handle no longer matches even when the slot is reused. Slots live
 * in chunks that are never freed, so looking a handle up never touches freed memory.
 * Plain lookups take no lock. What a plain lookup cannot catch: a use that races with the
 * object's release on another thread, and a slot reused 2^32 times between a handle's release
 * and its stale use. Where a call must survive that race (gr_job_submit against
 * gr_runtime_destroy), gr__handle_get_ref takes the object's reference under the table's lock,
 * which every release also takes: either the reference is taken before the release (and
 * keeps the object's memory alive), or the lookup fails.
 */
#ifndef GR_HANDLE_H
#define GR_HANDLE_H

#include <stdbool.h>
#include <stdint.h>

#include <graphrun.h>

/* What a handle stands for: a handle of one kind is not accepted as the other. */
typedef enum gr_handle_kind {
    GR_HANDLE_RUNTIME = 1,
    GR_HANDLE_JOB = 2,
} gr_handle_kind;

/* A new handle for `obj`. GR_ERR_OUT_OF_MEMORY when the table cannot grow (2^24 live
 * handles at most). Any thread. */
gr_status gr__handle_new(void *obj, gr_handle_kind kind, uintptr_t *out);

/* The object of a live handle of `kind`, or NULL for a released or malformed one, or one
 * of the other kind. Any thread. */
void *gr__handle_get(uintptr_t handle, gr_handle_kind kind);

/* The same, and while the handle is known live, ref(obj) is called: under the table's lock,
 * so no release can come between the check and the reference. Keep ref short (an atomic
 * increment). Any thread. */
void *gr__handle_get_ref(uintptr_t handle, gr_handle_kind kind, void (*ref)(void *obj));

/* Release a live handle: from now on gr__handle_get(handle) is NULL. Returns false, doing
 * nothing, when it was already released (by a racing call on another thread, say), so that
 * exactly one of two racing releases goes on to free the object. Any thread. */
bool gr__handle_release(uintptr_t handle);

#endif /* GR_HANDLE_H */
