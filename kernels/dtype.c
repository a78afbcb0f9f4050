/*
 * dtype.c - the table of element types (graphrun.h: gr_dtype). Adding a type: a row here,
 * the kernels that take it, and the readers and writers of files (tools/graphrun/npy.c).
 */
#include <graphrun.h>

static const struct {
    const char *name;
    uint32_t size;
} types[GR_DTYPE_COUNT_] = {
    [GR_DTYPE_FLOAT32] = {"float32", 4},
};

const char *gr_dtype_name(gr_dtype t)
{
    return (unsigned)t < GR_DTYPE_COUNT_ ? types[t].name : "unknown";
}

uint32_t gr_dtype_size(gr_dtype t)
{
    return (unsigned)t < GR_DTYPE_COUNT_ ? types[t].size : 0;
}
