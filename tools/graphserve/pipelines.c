/*
 * pipelines.c - graph specs loaded from a directory (pipelines.h).
 *
 * Loaded all at once before the server starts, so a bad spec stops graphserve at start-up
 * with the parser's message instead of failing requests later (a spec of CUDA C kernels
 * where NVRTC is missing is only left out, with a line on stderr); after that the table is
 * immutable and needs no lock. Names are unique because file names in a directory are.
 */
#define _GNU_SOURCE /* strdup */
#include "tools/graphserve/pipelines.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SUFFIX ".graph"

static int by_name(const void *a, const void *b)
{
    return strcmp(((const gs_pipeline *)a)->name, ((const gs_pipeline *)b)->name);
}

gr_status gs_pipelines_load(const char *dir, gs_pipelines *out, char *why, size_t why_len)
{
    gs_pipelines p = {NULL, 0};
    size_t cap = 0;
    struct dirent *e;
    gr_status st = GR_OK;
    DIR *d;

    out->items = NULL;
    out->count = 0;
    d = opendir(dir);
    if (d == NULL) {
        snprintf(why, why_len, "cannot read the graph directory %s: %s", dir, strerror(errno));
        return GR_ERR_INVALID_ARGUMENT;
    }
    while ((e = readdir(d)) != NULL) {
        size_t n = strlen(e->d_name), stem = n - strlen(SUFFIX);
        char path[4096];
        gr_error_info err;
        gr_graph *g;

        if (n <= strlen(SUFFIX) || strcmp(e->d_name + stem, SUFFIX) != 0)
            continue;
        if (stem > GS_PIPELINE_NAME_MAX) {
            snprintf(why, why_len, "%s/%s: a pipeline name is at most %d characters", dir,
                     e->d_name, GS_PIPELINE_NAME_MAX);
            st = GR_ERR_INVALID_ARGUMENT;
            break;
        }
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        if ((st = gr_graph_load(path, &g, &err)) == GR_ERR_UNAVAILABLE) {
            /* A pipeline of CUDA C kernels on a machine without NVRTC: the others serve. */
            fprintf(stderr, "graphserve: pipeline %.*s not served: %s\n", (int)stem, e->d_name,
                    err.message);
            st = GR_OK;
            continue;
        }
        if (st != GR_OK) {
            snprintf(why, why_len, "%s", err.message);
            break;
        }
        if (p.count == cap) {
            size_t grow = cap ? cap * 2 : 8;
            gs_pipeline *items = realloc(p.items, grow * sizeof(*items));

            if (items == NULL) {
                gr_graph_destroy(g);
                snprintf(why, why_len, "no memory");
                st = GR_ERR_OUT_OF_MEMORY;
                break;
            }
            p.items = items;
            cap = grow;
        }
        memcpy(p.items[p.count].name, e->d_name, stem);
        p.items[p.count].name[stem] = '\0';
        p.items[p.count].graph = g;
        p.count++;
    }
    closedir(d);
    if (st == GR_OK && p.count == 0) {
        snprintf(why, why_len, "no *.graph file in %s", dir);
        st = GR_ERR_INVALID_ARGUMENT;
    }
    if (st != GR_OK) {
        gs_pipelines_free(&p);
        return st;
    }
    qsort(p.items, p.count, sizeof(*p.items), by_name);
    *out = p;
    return GR_OK;
}

const gs_pipeline *gs_pipelines_find(const gs_pipelines *p, const char *name)
{
    gs_pipeline key;

    if (name == NULL || strlen(name) > GS_PIPELINE_NAME_MAX)
        return NULL;
    strcpy(key.name, name);
    return bsearch(&key, p->items, p->count, sizeof(key), by_name);
}

void gs_pipelines_names(const gs_pipelines *p, char *buf, size_t size)
{
    size_t at = 0;

    if (size == 0)
        return;
    buf[0] = '\0';
    for (size_t i = 0; i < p->count && at < size; i++) {
        int n = snprintf(buf + at, size - at, "%s%s", i ? ", " : "", p->items[i].name);

        if (n < 0)
            break;
        at += (size_t)n;
    }
}

void gs_pipelines_free(gs_pipelines *p)
{
    for (size_t i = 0; i < p->count; i++)
        gr_graph_destroy(p->items[i].graph);
    free(p->items);
    p->items = NULL;
    p->count = 0;
}
