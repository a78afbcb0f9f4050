/*
 * progress.c - the live progress line (see progress.h).
 */
#include "tools/graphrun/progress.h"

#include <stdio.h>
#include <unistd.h>

#include "tools/graphrun/cli.h"

void gr_progress_start(gr_progress *p, int mode, uint64_t bytes_per_tensor)
{
    p->enabled = mode > 0 || (mode == 0 && isatty(STDERR_FILENO));
    p->start_ns = gr_now_ns();
    p->bytes_per_tensor = bytes_per_tensor;
    p->last_len = 0;
}

void gr_progress_draw(gr_progress *p, const gr_job_progress *jp, const gr_runtime *rt)
{
    double secs = (double)(gr_now_ns() - p->start_ns) / 1e9;
    uint64_t ended = jp->done + jp->failed + jp->canceled, in_use = 0, cap = 0;
    gr_runtime_info info;
    char eta[32] = "--:--", b1[32], b2[32];
    int len;

    if (!p->enabled)
        return;
    if (gr_runtime_info_get(rt, &info) == GR_OK) {
        for (uint32_t d = 0; d < info.device_count; d++) {
            gr_device_stats st;
            if (gr_runtime_device_stats(rt, d, &st) == GR_OK) {
                in_use += st.budget_in_use;
                cap += st.budget_bytes;
            }
        }
    }
    if (ended > 0 && ended < jp->total) {
        double left = secs / (double)ended * (double)(jp->total - ended);
        snprintf(eta, sizeof(eta), "%d:%02d", (int)(left / 60), (int)left % 60);
    }
    len = fprintf(stderr, "\r%llu/%llu tensors%s  %.2f GB/s  budget %s of %s  ETA %s",
                  (unsigned long long)ended, (unsigned long long)jp->total,
                  jp->failed + jp->canceled ? " (some failed)" : "",
                  secs > 0 ? (double)jp->done * (double)p->bytes_per_tensor / secs / 1e9 : 0.0,
                  gr_cli_bytes(in_use, b1, sizeof(b1)), gr_cli_bytes(cap, b2, sizeof(b2)), eta);
    if (len < p->last_len)
        fprintf(stderr, "%*s", p->last_len - len, "");
    p->last_len = len;
    fflush(stderr);
}

void gr_progress_end(gr_progress *p)
{
    if (!p->enabled || p->last_len == 0)
        return;
    fprintf(stderr, "\r%*s\r", p->last_len, "");
    fflush(stderr);
    p->last_len = 0;
}
