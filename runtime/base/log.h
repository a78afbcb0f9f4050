/*
 * log.h - the runtime's logger: the config's callback and threshold, with the GR_LOG
 * environment override applied (graphrun.h, "Logging", has the contract callers see).
 *
 * GR_LOG(lg, level, fmt, ...) costs one comparison when the level is below the threshold,
 * so call sites on warm paths pay nothing while logging is off.
 */
#ifndef GR_LOG_H
#define GR_LOG_H

#include <stdbool.h>

#include <graphrun.h>

typedef struct gr_logger {
    gr_log_callback fn; /* NULL: silent */
    void *user;
    gr_log_level level; /* messages below it are dropped */
} gr_logger;

/* The logger `cfg` asks for (a config that passed validation), with GR_LOG applied. Reads
 * the environment: call where getenv is safe (gr_runtime_create). */
void gr__logger_init(gr_logger *lg, const gr_config *cfg);

static inline bool gr__log_enabled(const gr_logger *lg, gr_log_level level)
{
    return lg->fn != NULL && level >= lg->level && level < GR_LOG_OFF;
}

/* Format one line and hand it to the callback (no check of the level: see GR_LOG). */
void gr__log_write(const gr_logger *lg, gr_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define GR_LOG(lg, level, ...)                                                              \
    do {                                                                                    \
        if (gr__log_enabled((lg), (level)))                                                 \
            gr__log_write((lg), (level), __VA_ARGS__);                                      \
    } while (0)

/* Parse a level name as GR_LOG spells it ("debug", "info", "warn" or "warning", "error",
 * "off" or "none"; any case). False when it is none of these. */
bool gr__log_level_parse(const char *text, gr_log_level *out);

#endif /* GR_LOG_H */
