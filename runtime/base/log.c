/*
 * log.c - the runtime's logger (log.h).
 *
 * A message is formatted into a buffer on the caller's stack and handed to the callback in
 * one call, so lines from different threads never interleave inside the callback's view of
 * them; the stderr sink writes each line with one fprintf, which stdio locks. Nothing here
 * takes a runtime lock or allocates, so any runtime thread may log at any point where it
 * holds no lock of its own (call sites make sure of that: graphrun.h promises it).
 *
 * The environment is read once, at gr_runtime_create: GR_LOG replaces the threshold and,
 * when the caller set no callback, sends messages to stderr. An unreadable value is not a
 * reason to refuse a runtime; whoever set it wanted logging, so they get warn and above on
 * stderr, and the first line says what was wrong with the value.
 */
#include "runtime/base/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

#define LINE_MAX_BYTES 512

static const char *const level_names[] = {"debug", "info", "warn", "error", "off"};

const char *gr_log_level_name(gr_log_level level)
{
    if ((unsigned)level > GR_LOG_OFF)
        return "unknown";
    return level_names[level];
}

bool gr__log_level_parse(const char *text, gr_log_level *out)
{
    static const struct {
        const char *name;
        gr_log_level level;
    } names[] = {
        {"debug", GR_LOG_DEBUG}, {"info", GR_LOG_INFO}, {"warn", GR_LOG_WARN},
        {"warning", GR_LOG_WARN}, {"error", GR_LOG_ERROR}, {"off", GR_LOG_OFF},
        {"none", GR_LOG_OFF},
    };

    for (size_t i = 0; text != NULL && i < sizeof(names) / sizeof(names[0]); i++) {
        if (strcasecmp(text, names[i].name) == 0) {
            *out = names[i].level;
            return true;
        }
    }
    return false;
}

static void to_stderr(gr_log_level level, const char *message, void *user)
{
    (void)user;
    fprintf(stderr, "graphrun: %s: %s\n", gr_log_level_name(level), message);
}

void gr__logger_init(gr_logger *lg, const gr_config *cfg)
{
    const char *env = getenv("GR_LOG");
    gr_log_level level;

    lg->fn = cfg->log_callback;
    lg->user = cfg->log_user;
    lg->level = cfg->log_level;
    if (env == NULL || *env == '\0')
        return;
    if (lg->fn == NULL) {
        lg->fn = to_stderr;
        lg->user = NULL;
    }
    if (gr__log_level_parse(env, &level)) {
        lg->level = level;
        return;
    }
    lg->level = GR_LOG_WARN;
    gr__log_write(lg, GR_LOG_WARN,
                  "GR_LOG=%.64s is not a log level (debug, info, warn, error or off); "
                  "logging at warn",
                  env);
}

void gr__log_write(const gr_logger *lg, gr_log_level level, const char *fmt, ...)
{
    char line[LINE_MAX_BYTES];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    lg->fn(level, line, lg->user);
}
