/*
 * dtype.c - the table of element types (graphrun.h: gr_dtype) and the conversions between
 * them (kernels/dtype.h). Adding a type: a row here, a case in dtype.h's conversions and in
 * graphrun_kernel.h's, the kernels that take it (builtin.c), and the readers and writers of
 * files (tools/graphrun/npy.c).
 */
#include <string.h>

#include "kernels/dtype.h"

static const struct {
    const char *name;
    uint32_t size;
    int kind; /* 0 unsigned integer, 1 signed integer, 2 floating point */
    int bits; /* of precision: digits of the significand for floats, value bits for ints */
} types[GR_DTYPE_COUNT_] = {
    [GR_DTYPE_FLOAT32] = {"float32", 4, 2, 24},  [GR_DTYPE_FLOAT16] = {"float16", 2, 2, 11},
    [GR_DTYPE_BFLOAT16] = {"bfloat16", 2, 2, 8}, [GR_DTYPE_FLOAT64] = {"float64", 8, 2, 53},
    [GR_DTYPE_INT32] = {"int32", 4, 1, 31},      [GR_DTYPE_UINT8] = {"uint8", 1, 0, 8},
};

const char *gr_dtype_name(gr_dtype t)
{
    return (unsigned)t < GR_DTYPE_COUNT_ ? types[t].name : "unknown";
}

uint32_t gr_dtype_size(gr_dtype t)
{
    return (unsigned)t < GR_DTYPE_COUNT_ ? types[t].size : 0;
}

gr_status gr_dtype_parse(const char *name, gr_dtype *out)
{
    if (name == NULL || out == NULL)
        return GR_ERR_INVALID_ARGUMENT;
    for (int t = 0; t < GR_DTYPE_COUNT_; t++)
        if (strcmp(types[t].name, name) == 0) {
            *out = (gr_dtype)t;
            return GR_OK;
        }
    return GR_ERR_INVALID_ARGUMENT;
}

bool gr__dtype_is_float(gr_dtype t)
{
    return (unsigned)t < GR_DTYPE_COUNT_ && types[t].kind == 2;
}

int gr_dtype_safe_cast(gr_dtype from, gr_dtype to)
{
    if ((unsigned)from >= GR_DTYPE_COUNT_ || (unsigned)to >= GR_DTYPE_COUNT_)
        return 0;
    if (from == to)
        return 1;
    /* Every value fits when the target has at least the digits of the source and at
     * least its range: no float fits an integer type; no signed type fits an unsigned one;
     * float16 and bfloat16 each lack what the other has (digits, range); and float32,
     * float64 and any integer of up to 8 bits hold every value of a narrower type. */
    if (types[from].kind == 2 && types[to].kind != 2)
        return 0;
    if (types[from].kind == 1 && types[to].kind == 0)
        return 0;
    if ((from == GR_DTYPE_FLOAT16 && to == GR_DTYPE_BFLOAT16) ||
        (from == GR_DTYPE_BFLOAT16 && to == GR_DTYPE_FLOAT16))
        return 0;
    if (from == GR_DTYPE_INT32 && types[to].kind == 2)
        return types[to].bits >= 32;
    return types[to].bits >= types[from].bits;
}
