/*
 * io_util.h - the small string and path helpers that inputs.c and io.c share: a refusal's
 * reason, a name's ending, a directory joined with a name, and the order of names.
 * Pure functions, callable from any thread.
 */
#ifndef GR_IO_UTIL_H
#define GR_IO_UTIL_H

#include <stdbool.h>
#include <stddef.h>

#include <graphrun.h>

/* Formats the reason into why[len] (truncated to fit) and returns GR_ERR_INVALID_ARGUMENT. */
gr_status gr_io_fail(char *why, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Whether s ends with suffix. */
bool gr_io_ends_with(const char *s, const char *suffix);

/* DIR/NAME, malloc'd (NULL when out of memory), with no second '/' when dir ends in one;
 * name "" gives DIR/. */
char *gr_io_join(const char *dir, const char *name);

/* strcmp of two `char *` array elements, for qsort and bsearch. */
int gr_io_name_cmp(const void *a, const void *b);

#endif /* GR_IO_UTIL_H */
