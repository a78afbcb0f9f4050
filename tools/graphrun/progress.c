/*
 * progress.c - the live progress line (see progress.h).
 *
 * Rates are averages since the start: steady to read, and what the time to go is
 * extrapolated from (the bytes left at the rate the done ones took).
 */
#include "tools/graphrun/progress.h"

#include <stdio.h>
#include <unistd.h>

#include <graphrun.h>
#include "tools/graphrun/cli.h"

#define PROGRESS_EVERY_MS 100

void gr_progress_start(gr_progress *p, int mode)
{
    p->enabled = mode > 0 || (mode == 0 && isatty(STDERR_FILENO));
    p->drawn_ns = 0;
    p->last_len = 0;
}

static double rate(uint64_t bytes, double s)
{
    return s > 0 ? (double)bytes / s / 1e9 : 0.0;
}

void gr_progress_draw(gr_progress *p, const gr_progress_info *pi, bool force)
{
    int64_t now = gr_now_ns();
    char eta[32] = "--:--", failed[32] = "", b1[32], b2[32];
    int len;

    if (!p->enabled || (!force && now - p->drawn_ns < PROGRESS_EVERY_MS * 1000000ll))
        return;
    p->drawn_ns = now;
    if (pi->done_bytes > 0 && pi->done_bytes < pi->total_bytes) {
        double left = pi->seconds / (double)pi->done_bytes *
                      (double)(pi->total_bytes - pi->done_bytes);

        snprintf(eta, sizeof(eta), "%d:%02d", (int)(left / 60), (int)left % 60);
    }
    if (pi->failed)
        snprintf(failed, sizeof(failed), ", %llu failed", (unsigned long long)pi->failed);
    len = fprintf(stderr,
                  "\r%llu/%llu tensors%s | disk read %.2f GB/s, write %.2f GB/s | link %.2f "
                  "GB/s | host %s of %s | ETA %s",
                  (unsigned long long)pi->done, (unsigned long long)pi->tensors, failed,
                  rate(pi->read_bytes, pi->seconds), rate(pi->written_bytes, pi->seconds),
                  rate(pi->done_bytes, pi->seconds),
                  gr_cli_bytes(pi->host_in_use, b1, sizeof(b1)),
                  gr_cli_bytes(pi->host_limit, b2, sizeof(b2)), eta);
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
