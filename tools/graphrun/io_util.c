/*
 * io_util.c - string and path helpers of inputs.c and io.c (see io_util.h).
 */
#include "tools/graphrun/io_util.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

gr_status gr_io_fail(char *why, size_t len, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(why, len, fmt, ap);
    va_end(ap);
    return GR_ERR_INVALID_ARGUMENT;
}

bool gr_io_ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);

    return n >= m && strcmp(s + n - m, suffix) == 0;
}

char *gr_io_join(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);

    if (p)
        snprintf(p, n, "%s%s%s", dir, gr_io_ends_with(dir, "/") ? "" : "/", name);
    return p;
}

int gr_io_name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}
