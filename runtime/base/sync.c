/*
 * sync.c - the monotonic clock, deadline-aware condition waits, and error-detail helpers.
 *
 * Every sleeping wait in graphrun goes through gr__cond_wait_until, so every wait can have a
 * deadline on one clock (CLOCK_MONOTONIC) and wakes on a signal from its cancel or shutdown
 * path; none polls.
 */
#include "runtime/base/sync.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

int64_t gr_now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int gr__cond_init(pthread_cond_t *cond)
{
    pthread_condattr_t attr;
    int rc;

    rc = pthread_condattr_init(&attr);
    if (rc != 0)
        return rc;
    rc = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    if (rc == 0)
        rc = pthread_cond_init(cond, &attr);
    pthread_condattr_destroy(&attr);
    return rc;
}

bool gr__cond_wait_until(pthread_cond_t *cond, pthread_mutex_t *mu, int64_t deadline_ns)
{
    struct timespec ts;

    if (deadline_ns == GR_NO_DEADLINE) {
        pthread_cond_wait(cond, mu);
        return false;
    }
    if (gr_now_ns() >= deadline_ns)
        return true;
    ts.tv_sec = (time_t)(deadline_ns / 1000000000);
    ts.tv_nsec = (long)(deadline_ns % 1000000000);
    return pthread_cond_timedwait(cond, mu, &ts) == ETIMEDOUT;
}

int64_t gr__deadline_after(int64_t timeout_ns)
{
    int64_t now;

    if (timeout_ns < 0)
        return GR_NO_DEADLINE;
    now = gr_now_ns();
    if (timeout_ns > INT64_MAX - now)
        return INT64_MAX;
    /* 0 is GR_NO_DEADLINE; the monotonic clock is never 0 after boot, so now + 0 is safe. */
    return now + timeout_ns;
}

int64_t gr__deadline_min(int64_t a, int64_t b)
{
    if (a == GR_NO_DEADLINE)
        return b;
    if (b == GR_NO_DEADLINE)
        return a;
    return a < b ? a : b;
}

typedef struct sized_head {
    uint32_t struct_size, magic;
} sized_head;

bool gr__sized_out_ok(const void *out, uint32_t magic, size_t v1_size)
{
    sized_head h;

    if (out == NULL)
        return false;
    memcpy(&h, out, sizeof(h));
    return h.magic == magic && h.struct_size >= v1_size;
}

void gr__sized_out_fill(void *out, const void *full, size_t full_size)
{
    sized_head h;
    size_t n;

    memcpy(&h, out, sizeof(h));
    n = h.struct_size < full_size ? h.struct_size : full_size;
    if (n > sizeof(h))
        memcpy((char *)out + sizeof(h), (const char *)full + sizeof(h), n - sizeof(h));
}

void gr__strlcpy(char *dst, const char *src, size_t size)
{
    size_t n;

    if (size == 0)
        return;
    n = src ? strnlen(src, size - 1) : 0;
    if (n)
        memcpy(dst, src, n);
    dst[n] = '\0';
}

gr_status gr__error_set(gr_error_info *err, gr_status status, uint64_t index, const char *node,
                        const char *fmt, ...)
{
    va_list ap;

    if (err == NULL)
        return status;
    err->status = status;
    err->index = index;
    gr__strlcpy(err->node, node ? node : "", sizeof(err->node));
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof(err->message), fmt, ap);
    va_end(ap);
    return status;
}

void gr__error_prefix(gr_error_info *err, const char *fmt, ...)
{
    char prefix[sizeof(err->message)], rest[sizeof(err->message)];
    size_t n;
    va_list ap;

    if (err == NULL)
        return;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof(prefix), fmt, ap);
    va_end(ap);
    gr__strlcpy(rest, err->message, sizeof(rest));
    n = strlen(prefix);
    memcpy(err->message, prefix, n);
    gr__strlcpy(err->message + n, rest, sizeof(err->message) - n);
}
