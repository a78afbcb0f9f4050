/*
 * cli.h - command-line helpers shared by the driver's subcommands: number and size parsing
 * with clear errors, byte formatting, a parallel for over host threads.
 */
#ifndef GR_CLI_H
#define GR_CLI_H

#include <getopt.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <stdio.h>

/* Exit codes of the graphrun binary. */
#define GR_EXIT_OK 0
#define GR_EXIT_FAILED 1  /* the work ran but failed or produced wrong results */
#define GR_EXIT_USAGE 2   /* bad command line */
#define GR_EXIT_RUNTIME 3 /* the runtime could not start (no device, no memory, ...) */
#define GR_EXIT_CANCELED 130 /* interrupted by SIGINT or SIGTERM (128 + SIGINT) */

/* A non-negative integer ("123", "0x7b"); false on anything else. */
bool gr_cli_parse_u64(const char *s, uint64_t *out);

/* A size in bytes: decimal digits with an optional fraction, then an optional unit, in any
 * case: B; K, Ki, KiB (1024), KB (1000); the same for M, G, T. It must come to a whole
 * number of bytes ("1.5K" is 1536, "0.3K" is refused). False on anything else. */
bool gr_cli_parse_size(const char *s, uint64_t *out);

/* What a size flag's refusal adds: the accepted forms. */
#define GR_CLI_SIZE_FORMS                                                                   \
    " (sizes: 512, 512B, 4K = 4Ki = 4KiB = 4096 bytes, 4KB = 4000, 1.5GiB; K, M, G, T are " \
    "powers of 1024, KB, MB, GB, TB of 1000)"

/* The mode a new output file gets: 0666 less the process's umask, as open(2) would give it
 * (mkstemp's temporary files are 0600 whatever the umask). Read once; call it first from
 * the main thread. */
mode_t gr_cli_file_mode(void);

/* The process's resident set in bytes, from /proc/self/statm; 0 where /proc cannot say. */
uint64_t gr_cli_rss_bytes(void);

/* The process's peak resident set in bytes: VmHWM of /proc/self/status, the high-water mark
 * of this program's own memory. Not getrusage's ru_maxrss: Linux starts that at the peak of
 * the parent's memory at fork (exec keeps it), so a run started by a large process (a bench,
 * Python) would report the parent's peak. Falls back to ru_maxrss where /proc cannot say. */
uint64_t gr_cli_peak_rss_bytes(void);

/* Whether option `opt`, when it is one of `letters` (flags that take one value), is given for
 * the first time (recorded in *seen, a bit per letter, at most 32); false after printing
 * "WHO: --graph given twice: give it once" (WHO: "graphrun run", say), its name from
 * `longopts`: a second value would silently replace the first. */
bool gr_cli_once(uint32_t *seen, int opt, const char *letters, const char *who,
                 const struct option *longopts);

/* After an unknown option (getopt has named it): where the options are listed. */
void gr_cli_try_help(const char *cmd);

/* "12.00 MiB": `buf` of at least 32 bytes. */
const char *gr_cli_bytes(uint64_t bytes, char *buf, size_t size);

/* Run fn(i, arg) for i in [0, n) on up to `threads` host threads (0: one per CPU). */
void gr_cli_parallel_for(uint64_t n, unsigned threads, void (*fn)(uint64_t i, void *arg),
                         void *arg);

#endif /* GR_CLI_H */
