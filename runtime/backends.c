/*
 * backends.c - the table of backends and the choice among them.
 *
 * AUTO takes the first backend of the table whose probe succeeds, and says in the note why
 * it passed over the ones before it; an explicit choice takes that backend or fails with its
 * probe's reason. The host backend, last, can always run.
 */
#include <stdio.h>
#include <string.h>

#include "runtime/backend.h"
#include "runtime/base/sync.h"

const gr_backend_ops *const gr__backends[] = {
    &gr__backend_cuda,
    &gr__backend_host,
    NULL,
};

gr_status gr__backend_choose(const gr_config *cfg, const gr_backend_ops **out,
                             uint32_t *n_devices, char *note, size_t note_size, bool *fell_back,
                             gr_error_info *err)
{
    char why[128] = "";
    gr_error_info probe_err;

    *fell_back = false;
    for (const gr_backend_ops *const *b = gr__backends; *b != NULL; b++) {
        gr_status st;

        if (cfg->backend != GR_BACKEND_AUTO && cfg->backend != (*b)->kind)
            continue;
        st = (*b)->probe(cfg, n_devices, &probe_err);
        if (st == GR_OK) {
            *out = *b;
            if (cfg->backend != GR_BACKEND_AUTO)
                snprintf(note, note_size, "%s backend, as configured", (*b)->name);
            else if (*fell_back)
                snprintf(note, note_size, "auto chose the %s backend: %.90s", (*b)->name, why);
            else
                snprintf(note, note_size, "%s backend, %u device(s)", (*b)->name, *n_devices);
            return GR_OK;
        }
        if (cfg->backend != GR_BACKEND_AUTO) {
            if (err)
                *err = probe_err;
            return st;
        }
        /* Remember the first refusal: it is the reason AUTO did not get what it prefers. */
        if (!*fell_back)
            gr__strlcpy(why, probe_err.message, sizeof(why));
        *fell_back = true;
    }
    return gr__error_set(err, GR_ERR_UNAVAILABLE, GR_NO_INDEX, NULL,
                         "no backend can run here%s%s", why[0] ? ": " : "", why);
}

gr_status gr_backend_probe(gr_backend b, uint32_t *devices, gr_backend *chosen,
                           gr_error_info *err)
{
    gr_config cfg = GR_CONFIG_INIT;
    const gr_backend_ops *ops;
    uint32_t n = 0;
    bool fell_back;
    char note[128];
    gr_status st;

    cfg.backend = b;
    st = gr__backend_choose(&cfg, &ops, &n, note, sizeof(note), &fell_back, err);
    if (st == GR_OK) {
        if (devices)
            *devices = n;
        if (chosen)
            *chosen = ops->kind;
    }
    return st;
}
