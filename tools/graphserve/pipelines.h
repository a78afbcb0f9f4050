/*
 * pipelines.h - the named pipelines graphserve offers: every graph spec (*.graph) in a
 * directory, parsed once at start-up and shared read-only by every request.
 */
#ifndef GS_PIPELINES_H
#define GS_PIPELINES_H

#include <stddef.h>

#include <graphrun.h>

#define GS_PIPELINE_NAME_MAX 63

typedef struct gs_pipeline {
    char name[GS_PIPELINE_NAME_MAX + 1]; /* the file's name without ".graph" */
    gr_graph *graph;                     /* finalized */
} gs_pipeline;

typedef struct gs_pipelines {
    gs_pipeline *items; /* sorted by name */
    size_t count;
} gs_pipelines;

/* Load every DIR/NAME.graph. Any file that does not parse, a name longer than
 * GS_PIPELINE_NAME_MAX, or a directory with no graph at all is an error: `why` says which
 * and why (the spec parser's "file:line:col: ..."), and nothing is kept. */
gr_status gs_pipelines_load(const char *dir, gs_pipelines *out, char *why, size_t why_len);

/* The pipeline called `name`, or NULL. Any thread. */
const gs_pipeline *gs_pipelines_find(const gs_pipelines *p, const char *name);

/* "a, b, c" into buf (truncated to size). */
void gs_pipelines_names(const gs_pipelines *p, char *buf, size_t size);

void gs_pipelines_free(gs_pipelines *p);

#endif /* GS_PIPELINES_H */
