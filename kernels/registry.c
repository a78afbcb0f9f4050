/*
 * registry.c - the one registry of kernel definitions (graphrun.h, "Kernels").
 *
 * A table of the registered kernels (at most GR_MAX_KERNELS), in registration order, and
 * every access to it under `mu`: lookups are rare (building a graph, parsing a spec,
 * listing), never per iteration, since a graph keeps the kernels its nodes resolved.
 *
 * Lifetime: a kernel's definition never changes once registered. Each holder (a graph's
 * node, a lookup in progress) counts in `holds`, taken under `mu` together with the lookup,
 * so no one can free a kernel between finding it and holding it. Unregistering takes it out
 * of the table at once (its name and slot are free again) and frees it only when its holds
 * are 0; otherwise the last gr__kernel_release frees it. So a graph's kernels stay as they
 * were for the graph's life, and a kernel is freed, and its destroy called, exactly once:
 * by whichever of unregister and the last release sees it out of the table with no holds,
 * both deciding under `mu`. Destroy runs after `mu` is released (it may take its owner's
 * locks: expr.c's list_mu, which no one holds while taking `mu`).
 *
 * A kernel registered with no pin (gr__kernel_register_held) leaves the table by itself
 * when its last hold goes: an expression a spec registered for its graph.
 *
 * The built-ins come in through the same checks and the same insertion as any user's
 * kernel (registry_add), the first time anyone looks at the registry.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/builtin.h"
#include "kernels/kernels.h"
#include "kernels/nvrtc.h"
#include "runtime/base/sync.h"

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static gr_kernel *entries[GR_MAX_KERNELS]; /* guarded by mu, as is count */
static uint32_t count;
static pthread_once_t builtins_once = PTHREAD_ONCE_INIT;

/* The size of the first version of gr_kernel_def: callers must know at least that much. */
#define DEF_V1_SIZE (offsetof(gr_kernel_def, user) + sizeof(void *))

static void ensure_builtins(void)
{
    pthread_once(&builtins_once, gr__kernels_register_builtins);
}

/* A name as a spec's word spells it (`max` its longest), or with `identifier` as a C
 * identifier (a source kernel's entry). */
static bool valid_name(const char *name, size_t max, bool identifier)
{
    size_t n;

    if (name == NULL)
        return false;
    n = strlen(name);
    /* The first character is one a spec's word may start with, so specs can name it. */
    if (n == 0 || n > max ||
        !((name[0] >= 'a' && name[0] <= 'z') || (name[0] >= 'A' && name[0] <= 'Z') ||
          name[0] == '_'))
        return false;
    for (size_t i = 1; i < n; i++) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || (!identifier && (c == '-' || c == '.'))))
            return false;
    }
    return true;
}

static gr_kernel *find_among(const char *name, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        if (strcmp(entries[i]->name, name) == 0)
            return entries[i];
    return NULL;
}

static bool same_types(const gr_kernel_def *a, const gr_kernel_def *b)
{
    if (a->out_dtype != b->out_dtype || a->n_inputs != b->n_inputs)
        return false;
    for (uint32_t i = 0; i < a->n_inputs; i++)
        if (a->in_dtype[i] != b->in_dtype[i])
            return false;
    return true;
}

/* Whether `d` may join the kernels of its name already registered (the first `n` entries):
 * as an overload for other element types, with the same arity, by the same hand (the
 * built-ins' names are the built-ins' alone). NULL when it may, else why not. */
static const char *overload_refusal(const gr_kernel_def *d, bool builtin, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        const gr_kernel *e = entries[i];

        if (strcmp(e->name, d->name) != 0)
            continue;
        if (e->builtin != builtin)
            return "is already registered";
        if (e->def.n_inputs != d->n_inputs || e->def.n_scalars != d->n_scalars)
            return "is already registered with other counts of inputs or scalars (an "
                   "overload for other element types must take the same)";
        if (same_types(&e->def, d))
            return "is already registered for these element types";
    }
    return NULL;
}

/* `d` is a whole definition of this version (registry_add copied the caller's into one). */
static gr_status check_def(const gr_kernel_def *d, gr_error_info *err)
{
    const char *nm;

    if (!valid_name(d->name, GR_NAME_MAX, false))
        return gr__error_set(err, GR_ERR_INVALID_ARGUMENT, GR_NO_INDEX, NULL,
                             "kernel name must be 1-%d characters of [A-Za-z0-9_.-], starting "
                             "with a letter or '_' (got '%.40s')",
                             GR_NAME_MAX, d->name ? d->name : "(null)");
    nm = d->name;
    if (d->n_inputs > GR_MAX_KERNEL_INPUTS)
        return gr__error_set(err, GR_ERR_INVALID_ARGUMENT, GR_NO_INDEX, NULL,
                             "kernel '%s': %u inputs (at most %d)", nm, d->n_inputs,
                             GR_MAX_KERNEL_INPUTS);
    if (d->n_scalars > GR_MAX_SCALARS)
        return gr__error_set(err, GR_ERR_INVALID_ARGUMENT, GR_NO_INDEX, NULL,
                             "kernel '%s': %u scalars (at most %d)", nm, d->n_scalars,
                             GR_MAX_SCALARS);
    if (gr_dtype_size(d->out_dtype) == 0)
        return gr__error_set(err, GR_ERR_INVALID_ARGUMENT, GR_NO_INDEX, NULL,
                             "kernel '%s': unknown output element type %d", nm, (int)d->out_dtype);
    for (uint32_t i = 0; i < d->n_inputs; i++)
        if (gr_dtype_size(d->in_dtype[i]) == 0)
            return gr__error_set(err, GR_ERR_INVALID_ARGUMENT, GR_NO_INDEX, NULL,
                                 "kernel '%s': unknown element type %d of input %u", nm,
                                 (int)d->in_dtype[i], i);
    for (uint32_t i = 0; i < d->n_scalars; i++)
        if (gr_dtype_size(d->scalar_dtype[i]) == 0)
            return gr__error_set(err, GR_ERR_INVALID_ARGUMENT, GR_NO_INDEX, NULL,
                                 "kernel '%s': unknown element type %d of scalar %u", nm,
                                 (int)d->scalar_dtype[i], i);
    if ((unsigned)d->cuda_kind > GR_CUDA_STREAM)
        return gr__error_set(err, GR_ERR_INVALID_ARGUMENT, GR_NO_INDEX, NULL,
                             "kernel '%s': unknown cuda_kind %d", nm, (int)d->cuda_kind);
    if (d->cuda_kind == GR_CUDA_SOURCE &&
        !valid_name(d->cuda_name, GR_KERNEL_ENTRY_MAX, true))
        return gr__error_set(err, GR_ERR_INVALID_ARGUMENT, GR_NO_INDEX, NULL,
                             "kernel '%s': cuda_name must name the source's extern \"C\" "
                             "__global__ function, a C identifier of at most %d characters",
                             nm, GR_KERNEL_ENTRY_MAX);
    if ((unsigned)d->out_size > GR_OUT_BUFFER)
        return gr__error_set(err, GR_ERR_INVALID_ARGUMENT, GR_NO_INDEX, NULL,
                             "kernel '%s': unknown out_size %d", nm, (int)d->out_size);
    if (d->small_inputs >> d->n_inputs)
        return gr__error_set(err, GR_ERR_INVALID_ARGUMENT, GR_NO_INDEX, NULL,
                             "kernel '%s': small_inputs names an input past its %u", nm,
                             d->n_inputs);
    if (d->elementwise && d->out_size != GR_OUT_ELEMS)
        return gr__error_set(err, GR_ERR_INVALID_ARGUMENT, GR_NO_INDEX, NULL,
                             "kernel '%s': an elementwise kernel writes one element per element "
                             "(out_size GR_OUT_ELEMS)",
                             nm);
    if ((d->cuda_kind == GR_CUDA_NONE) != (d->cuda == NULL))
        return gr__error_set(err, GR_ERR_INVALID_ARGUMENT, GR_NO_INDEX, NULL,
                             "kernel '%s': cuda must be set exactly when cuda_kind is not "
                             "GR_CUDA_NONE",
                             nm);
    if (d->cuda_block > 1024)
        return gr__error_set(err, GR_ERR_INVALID_ARGUMENT, GR_NO_INDEX, NULL,
                             "kernel '%s': cuda_block %u is over 1024 threads", nm, d->cuda_block);
    if (d->cpu == NULL && d->cuda_kind == GR_CUDA_NONE)
        return gr__error_set(err, GR_ERR_INVALID_ARGUMENT, GR_NO_INDEX, NULL,
                             "kernel '%s' has neither a CPU nor a CUDA implementation", nm);
    if (d->doc != NULL && strlen(d->doc) >= sizeof(((gr_kernel *)0)->doc))
        return gr__error_set(err, GR_ERR_INVALID_ARGUMENT, GR_NO_INDEX, NULL,
                             "kernel '%s': doc is longer than %zu characters", nm,
                             sizeof(((gr_kernel *)0)->doc) - 1);
    return GR_OK;
}

/* A source kernel's text and entry, copied, and its PTX: compiled now, so that source NVRTC
 * refuses is refused at registration, with its log. Without NVRTC a kernel that also has a
 * CPU implementation still registers (the host backend can run it; the CUDA backend
 * refuses it, saying why); one that has none cannot run anywhere and is refused. */
static gr_status add_source(gr_kernel *k, const gr_kernel_def *d, gr_error_info *err)
{
    char why[256];
    gr_status st;

    k->source = strdup((const char *)d->cuda);
    if (k->source == NULL)
        return gr__error_set(err, GR_ERR_OUT_OF_MEMORY, GR_NO_INDEX, NULL, "no memory");
    gr__strlcpy(k->cuda_name, d->cuda_name, sizeof(k->cuda_name));
    k->def.cuda = k->source;
    k->def.cuda_name = k->cuda_name;
    if (!gr__nvrtc_available(why, sizeof(why))) {
        if (d->cpu == NULL)
            return gr__error_set(err, GR_ERR_UNAVAILABLE, GR_NO_INDEX, NULL,
                                 "kernel '%s': %s", k->name, why);
        gr__strlcpy(k->cuda_unavailable, why, sizeof(k->cuda_unavailable));
        return GR_OK;
    }
    st = gr__nvrtc_compile(k->source, k->name, &k->ptx, err);
    if (st != GR_OK)
        gr__error_prefix(err, "kernel '%s': ", k->name);
    return st;
}

static bool same_kernel(const gr_kernel *k, const gr_kernel_def *d);

/* Whether one of the first `n` entries is exactly `d`. */
static bool same_kernel_among(const gr_kernel_def *d, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        if (same_kernel(entries[i], d))
            return true;
    return false;
}

static void free_kernel(gr_kernel *k)
{
    if (k->def.destroy != NULL)
        k->def.destroy(k->def.user);
    free(k->source);
    free(k);
}

/* Check and insert: the one way into the registry, for the built-ins and every caller. With
 * `same_ok`, a kernel of the name registered from exactly this definition is success.
 * Without `pinned`, the kernel is registered with one hold, given to *held, and leaves the
 * table with its last hold. */
static gr_status registry_add(const gr_kernel_def *caller, bool same_ok, bool builtin,
                              bool pinned, const gr_kernel **held, gr_error_info *err)
{
    static uint64_t next_id = 1; /* guarded by mu */
    gr_kernel_def full, *d = &full;
    const char *refusal;
    bool already = false;
    gr_status st;
    gr_kernel *k;
    uint32_t n;

    if (caller == NULL)
        return gr__error_set(err, GR_ERR_INVALID_ARGUMENT, GR_NO_INDEX, NULL,
                             "kernel definition is NULL");
    if (caller->magic != GR_KERNEL_DEF_MAGIC || caller->struct_size < DEF_V1_SIZE)
        return gr__error_set(err, GR_ERR_INVALID_ARGUMENT, GR_NO_INDEX, NULL,
                             "kernel definition not initialized with GR_KERNEL_DEF_INIT");
    /* A caller compiled against an older, shorter definition gets zeros (the defaults) for
     * the fields it does not know. */
    memset(&full, 0, sizeof(full));
    memcpy(&full, caller, caller->struct_size < sizeof(full) ? caller->struct_size : sizeof(full));
    if ((st = check_def(d, err)) != GR_OK)
        return st;
    k = calloc(1, sizeof(*k));
    if (k == NULL)
        return gr__error_set(err, GR_ERR_OUT_OF_MEMORY, GR_NO_INDEX, NULL, "no memory");
    k->def = full;
    k->def.struct_size = sizeof(k->def);
    gr__strlcpy(k->name, d->name, sizeof(k->name));
    gr__strlcpy(k->doc, d->doc ? d->doc : "", sizeof(k->doc));
    k->def.name = k->name;
    k->def.doc = k->doc;
    k->builtin = builtin;
    k->pinned = pinned;
    k->listed = true;
    k->holds = pinned ? 0 : 1;
    if (d->cuda_kind == GR_CUDA_SOURCE && (st = add_source(k, d, err)) != GR_OK) {
        free(k->source);
        free(k);
        return st;
    }

    pthread_mutex_lock(&mu);
    n = count;
    if (same_ok && same_kernel_among(&k->def, n)) {
        already = true;
    } else if ((refusal = overload_refusal(&k->def, builtin, n)) != NULL) {
        st = gr__error_set(err, GR_ERR_INVALID_ARGUMENT, GR_NO_INDEX, NULL, "kernel '%s' %s",
                           k->name, refusal);
    } else if (n == GR_MAX_KERNELS)
        st = gr__error_set(err, GR_ERR_OVER_BUDGET, GR_NO_INDEX, NULL,
                           "the registry is full (%d kernels registered; unregister some)",
                           GR_MAX_KERNELS);
    if (st == GR_OK && !already) {
        k->id = next_id++;
        entries[n] = k;
        count = n + 1;
    }
    pthread_mutex_unlock(&mu);
    if (st != GR_OK || already) {
        /* Not registered: the caller keeps its user data, so no destroy. */
        free(k->source);
        free(k);
        return st;
    }
    if (held != NULL)
        *held = k;
    return st;
}

static bool same_kernel(const gr_kernel *k, const gr_kernel_def *d)
{
    const gr_kernel_def *e = &k->def;

    if (strcmp(k->name, d->name) != 0 || e->n_inputs != d->n_inputs ||
        e->n_scalars != d->n_scalars || e->out_dtype != d->out_dtype ||
        e->elementwise != d->elementwise || e->cpu != d->cpu || e->user != d->user ||
        e->cuda_kind != d->cuda_kind || e->cuda_block != d->cuda_block ||
        e->cuda_blocks_per_sm != d->cuda_blocks_per_sm || e->out_size != d->out_size ||
        e->small_inputs != d->small_inputs || e->cuda_max_blocks != d->cuda_max_blocks ||
        e->destroy != d->destroy)
        return false;
    for (uint32_t i = 0; i < e->n_inputs; i++)
        if (e->in_dtype[i] != d->in_dtype[i])
            return false;
    for (uint32_t i = 0; i < e->n_scalars; i++)
        if (e->scalar_dtype[i] != d->scalar_dtype[i])
            return false;
    if (e->cuda_kind != GR_CUDA_SOURCE)
        return e->cuda == d->cuda;
    return strcmp(k->source, (const char *)d->cuda) == 0 &&
           strcmp(k->cuda_name, d->cuda_name) == 0;
}

gr_status gr_kernel_register(const gr_kernel_def *def, gr_error_info *err)
{
    ensure_builtins();
    return registry_add(def, false, false, true, NULL, err);
}

gr_status gr__kernel_register_same_ok(const gr_kernel_def *def, gr_error_info *err)
{
    ensure_builtins();
    return registry_add(def, true, false, true, NULL, err);
}

gr_status gr__kernel_register_held(const gr_kernel_def *def, const gr_kernel **held,
                                   gr_error_info *err)
{
    ensure_builtins();
    return registry_add(def, false, false, false, held, err);
}

/* Called once, by pthread_once: the built-ins' registration cannot itself wait for it. */
gr_status gr__kernels_add_builtin(const gr_kernel_def *def, gr_error_info *err)
{
    return registry_add(def, false, true, true, NULL, err);
}

/* Take entry i out of the table, keeping the others' order; under mu. */
static void unlist(uint32_t i)
{
    entries[i]->listed = false;
    memmove(&entries[i], &entries[i + 1], (count - i - 1) * sizeof(entries[0]));
    count--;
}

gr_status gr_kernel_unregister(const char *name, gr_error_info *err)
{
    gr_kernel *dead[GR_MAX_KERNELS];
    uint32_t n_dead = 0;
    bool found = false;
    gr_kernel *k;

    if (name == NULL)
        return gr__error_set(err, GR_ERR_INVALID_ARGUMENT, GR_NO_INDEX, NULL,
                             "gr_kernel_unregister: name is NULL");
    ensure_builtins();
    pthread_mutex_lock(&mu);
    k = find_among(name, count);
    if (k != NULL && k->builtin) {
        pthread_mutex_unlock(&mu);
        return gr__error_set(err, GR_ERR_INVALID_ARGUMENT, GR_NO_INDEX, NULL,
                             "kernel '%s' is a built-in, which cannot be unregistered", name);
    }
    for (uint32_t i = count; i-- > 0;) {
        k = entries[i];
        if (strcmp(k->name, name) != 0)
            continue;
        found = true;
        unlist(i);
        if (k->holds == 0)
            dead[n_dead++] = k;
    }
    pthread_mutex_unlock(&mu);
    if (!found)
        return gr__error_set(err, GR_ERR_INVALID_ARGUMENT, GR_NO_INDEX, NULL,
                             "no kernel '%.*s' is registered", GR_NAME_MAX, name);
    for (uint32_t i = 0; i < n_dead; i++)
        free_kernel(dead[i]);
    return GR_OK;
}

const gr_kernel *gr__kernel_hold(const char *name)
{
    gr_kernel *k;

    if (name == NULL)
        return NULL;
    ensure_builtins();
    pthread_mutex_lock(&mu);
    if ((k = find_among(name, count)) != NULL)
        k->holds++;
    pthread_mutex_unlock(&mu);
    return k;
}

static gr_kernel *find_typed(const char *name, const gr_dtype *in, uint32_t n_in, gr_dtype out)
{
    for (uint32_t i = 0; name != NULL && i < count; i++) {
        const gr_kernel_def *d = &entries[i]->def;
        bool match = strcmp(entries[i]->name, name) == 0 && d->n_inputs == n_in &&
                     d->out_dtype == out;

        for (uint32_t k = 0; match && k < n_in; k++)
            match = d->in_dtype[k] == in[k];
        if (match)
            return entries[i];
    }
    return NULL;
}

const gr_kernel *gr__kernel_hold_typed(const char *name, const gr_dtype *in, uint32_t n_in,
                                       gr_dtype out)
{
    gr_kernel *k;

    ensure_builtins();
    pthread_mutex_lock(&mu);
    if ((k = find_typed(name, in, n_in, out)) != NULL)
        k->holds++;
    pthread_mutex_unlock(&mu);
    return k;
}

const gr_kernel *gr__kernel_hold_user(const char *name, const void *user, bool pin)
{
    gr_kernel *k = NULL;

    ensure_builtins();
    pthread_mutex_lock(&mu);
    for (uint32_t i = 0; name != NULL && i < count && k == NULL; i++)
        if (entries[i]->def.user == user && strcmp(entries[i]->name, name) == 0)
            k = entries[i];
    if (k != NULL) {
        k->holds++;
        k->pinned |= pin;
    }
    pthread_mutex_unlock(&mu);
    return k;
}

void gr__kernel_release(const gr_kernel *held)
{
    gr_kernel *k = (gr_kernel *)held;
    bool dead = false;

    if (k == NULL)
        return;
    pthread_mutex_lock(&mu);
    if (--k->holds == 0) {
        if (k->listed && !k->pinned) {
            for (uint32_t i = 0; i < count; i++)
                if (entries[i] == k) {
                    unlist(i);
                    break;
                }
        }
        dead = !k->listed;
    }
    pthread_mutex_unlock(&mu);
    if (dead)
        free_kernel(k);
}

const gr_kernel *gr__kernel_find(const char *name)
{
    gr_kernel *k;

    if (name == NULL)
        return NULL;
    ensure_builtins();
    pthread_mutex_lock(&mu);
    k = find_among(name, count);
    pthread_mutex_unlock(&mu);
    return k;
}

const gr_kernel *gr__kernel_find_typed(const char *name, const gr_dtype *in, uint32_t n_in,
                                       gr_dtype out)
{
    gr_kernel *k;

    ensure_builtins();
    pthread_mutex_lock(&mu);
    k = find_typed(name, in, n_in, out);
    pthread_mutex_unlock(&mu);
    return k;
}

void gr__kernel_signatures(const char *name, char *buf, size_t size)
{
    size_t used = 0;

    if (size == 0)
        return;
    buf[0] = '\0';
    ensure_builtins();
    pthread_mutex_lock(&mu);
    for (uint32_t i = 0; i < count; i++) {
        const gr_kernel_def *d = &entries[i]->def;
        char sig[96];
        size_t at = 0;
        int w;

        if (strcmp(entries[i]->name, name) != 0)
            continue;
        sig[0] = '\0';
        for (uint32_t k = 0; k < d->n_inputs; k++)
            at += (size_t)snprintf(sig + at, sizeof(sig) - at, "%s%s", k ? ", " : "",
                                   gr_dtype_name(d->in_dtype[k]));
        w = snprintf(buf + used, size - used, "%s(%s) -> %s", used ? "; " : "", sig,
                     gr_dtype_name(d->out_dtype));
        if (w < 0 || (size_t)w >= size - used) {
            if (size >= 4)
                snprintf(buf + (used < size - 4 ? used : size - 4), 4, "...");
            break;
        }
        used += (size_t)w;
    }
    pthread_mutex_unlock(&mu);
}

const gr_kernel *gr__kernel_at(uint32_t i)
{
    gr_kernel *k;

    ensure_builtins();
    pthread_mutex_lock(&mu);
    k = i < count ? entries[i] : NULL;
    pthread_mutex_unlock(&mu);
    return k;
}

uint32_t gr_kernel_count(void)
{
    uint32_t n;

    ensure_builtins();
    pthread_mutex_lock(&mu);
    n = count;
    pthread_mutex_unlock(&mu);
    return n;
}

/* The end of the first version of gr_kernel_info (0.3's, the first with a struct_size):
 * callers must know at least that much. */
#define KERNEL_INFO_V1_SIZE                                                                 \
    (offsetof(gr_kernel_info, in_dtype) + sizeof(((gr_kernel_info *)0)->in_dtype))

gr_status gr_kernel_info_get(uint32_t i, gr_kernel_info *out)
{
    const gr_kernel *k;
    gr_kernel_info info;

    if (!gr__sized_out_ok(out, GR_KERNEL_INFO_MAGIC, KERNEL_INFO_V1_SIZE))
        return GR_ERR_INVALID_ARGUMENT;
    ensure_builtins();
    pthread_mutex_lock(&mu);
    k = i < count ? entries[i] : NULL;
    memset(&info, 0, sizeof(info));
    if (k != NULL) {
        info.name = k->name;
        info.n_inputs = k->def.n_inputs;
        info.n_scalars = k->def.n_scalars;
        info.elementwise = k->def.elementwise;
        info.doc = k->doc;
        info.out_dtype = k->def.out_dtype;
        memcpy(info.in_dtype, k->def.in_dtype, sizeof(info.in_dtype));
    }
    pthread_mutex_unlock(&mu);
    if (k == NULL)
        return GR_ERR_INVALID_ARGUMENT;
    gr__sized_out_fill(out, &info, sizeof(info));
    return GR_OK;
}

void gr__kernel_list(char *buf, size_t size)
{
    size_t used = 0;

    if (size == 0)
        return;
    buf[0] = '\0';
    ensure_builtins();
    pthread_mutex_lock(&mu);
    for (uint32_t i = 0; i < count; i++) {
        int w;

        if (find_among(entries[i]->name, i) != NULL) /* an overload: named once */
            continue;
        w = snprintf(buf + used, size - used, "%s%s", used ? ", " : "", entries[i]->name);

        if (w < 0 || (size_t)w >= size - used) {
            if (size >= 4)
                snprintf(buf + (used < size - 4 ? used : size - 4), 4, "...");
            break;
        }
        used += (size_t)w;
    }
    pthread_mutex_unlock(&mu);
}
