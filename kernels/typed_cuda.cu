/*
 * typed_cuda.cu - CUDA versions of the typed built-ins and of `cast` (typed.h): one
 * template per kind, instantiated for each type in the tables below. Exact operations use
 * the _rn intrinsics (no contraction into FMAs), and the conversions are graphrun_kernel.h's,
 * so that results equal typed_cpu.c's bit for bit where typed.h says they do.
 */
#include <stdint.h>

#include "kernels/typed.h"
#define GR_KERNEL_HEADER_CONVERSIONS_ONLY
#include "kernels/graphrun_kernel.h"

#define GRID_STRIDE_LOOP(i, n)                                                              \
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < (n);             \
         i += (uint64_t)gridDim.x * blockDim.x)

/* Storage types: how an element is read into its compute type and written back. */
struct f16_t {};
struct bf16_t {};

template <typename S> struct io;
template <> struct io<float> {
    typedef float C;
    static __device__ float load(const void *p, uint64_t i) { return ((const float *)p)[i]; }
    static __device__ void store(void *p, uint64_t i, float v) { ((float *)p)[i] = v; }
    static __device__ float scalar(gr_scalar s) { return s.f32; }
};
template <> struct io<double> {
    typedef double C;
    static __device__ double load(const void *p, uint64_t i) { return ((const double *)p)[i]; }
    static __device__ void store(void *p, uint64_t i, double v) { ((double *)p)[i] = v; }
    static __device__ double scalar(gr_scalar s) { return s.f64; }
};
template <> struct io<f16_t> {
    typedef float C;
    static __device__ float load(const void *p, uint64_t i)
    {
        return gr_f16_to_f32(((const unsigned short *)p)[i]);
    }
    static __device__ void store(void *p, uint64_t i, float v)
    {
        ((unsigned short *)p)[i] = gr_f32_to_f16(v);
    }
    static __device__ float scalar(gr_scalar s) { return s.f32; }
};
template <> struct io<bf16_t> {
    typedef float C;
    static __device__ float load(const void *p, uint64_t i)
    {
        return gr_bf16_to_f32(((const unsigned short *)p)[i]);
    }
    static __device__ void store(void *p, uint64_t i, float v)
    {
        ((unsigned short *)p)[i] = gr_f32_to_bf16(v);
    }
    static __device__ float scalar(gr_scalar s) { return s.f32; }
};

/* The operations, in float32 and float64, rounded as the CPU's C operators round. */
__device__ static inline float mul_(float a, float b) { return __fmul_rn(a, b); }
__device__ static inline double mul_(double a, double b) { return __dmul_rn(a, b); }
__device__ static inline float add_(float a, float b) { return __fadd_rn(a, b); }
__device__ static inline double add_(double a, double b) { return __dadd_rn(a, b); }
__device__ static inline float sub_(float a, float b) { return __fsub_rn(a, b); }
__device__ static inline double sub_(double a, double b) { return __dsub_rn(a, b); }
__device__ static inline float div_(float a, float b) { return __fdiv_rn(a, b); }
__device__ static inline double div_(double a, double b) { return __ddiv_rn(a, b); }
__device__ static inline float exp_(float a) { return expf(a); }
__device__ static inline double exp_(double a) { return exp(a); }
__device__ static inline float log_(float a) { return logf(a); }
__device__ static inline double log_(double a) { return log(a); }
__device__ static inline float tanh_(float a) { return tanhf(a); }
__device__ static inline double tanh_(double a) { return tanh(a); }
__device__ static inline float min_(float a, float b) { return fminf(a, b); }
__device__ static inline double min_(double a, double b) { return fmin(a, b); }
__device__ static inline float max_(float a, float b) { return fmaxf(a, b); }
__device__ static inline double max_(double a, double b) { return fmax(a, b); }
__device__ static inline float sqrt_(float a) { return sqrtf(a); }
__device__ static inline double sqrt_(double a) { return sqrt(a); }
__device__ static inline float pow_(float a, float b) { return powf(a, b); }
__device__ static inline double pow_(double a, double b) { return pow(a, b); }

template <typename C> __device__ static inline C pow_scalar(C x, C e)
{
    if (e == (C)0.5)
        return sqrt_(x);
    if (e == (C)1)
        return x;
    if (e == (C)2)
        return mul_(x, x);
    return pow_(x, e);
}

template <int OP, typename S> __global__ void typed_kernel(gr_kernel_args a)
{
    typedef typename io<S>::C C;
    const bool two = OP == GR_OP_AXPBY || OP == GR_OP_MUL2 || OP == GR_OP_ADD2;
    C s0 = io<S>::scalar(a.s[0]), s1 = io<S>::scalar(a.s[1]);

    GRID_STRIDE_LOOP(i, a.n)
    {
        C x = io<S>::load(a.in[0], i), y = two ? io<S>::load(a.in[1], i) : (C)0, r;

        switch (OP) {
        case GR_OP_MUL: r = mul_(x, s0); break;
        case GR_OP_ADD: r = add_(x, s0); break;
        case GR_OP_POW: r = pow_scalar(x, s0); break;
        case GR_OP_AXPBY: r = add_(mul_(s0, x), mul_(s1, y)); break;
        case GR_OP_SUB: r = sub_(x, s0); break;
        case GR_OP_DIV: r = div_(x, s0); break;
        case GR_OP_EXP: r = exp_(x); break;
        case GR_OP_LOG: r = log_(x); break;
        case GR_OP_TANH: r = tanh_(x); break;
        case GR_OP_SIGMOID: r = div_((C)1, add_((C)1, exp_(-x))); break;
        case GR_OP_CLAMP: r = min_(max_(x, s0), s1); break;
        case GR_OP_MUL2: r = mul_(x, y); break;
        case GR_OP_ADD2: r = add_(x, y); break;
        default: r = x; break;
        }
        io<S>::store(a.out, i, r);
    }
}

/* Casts: every value is exact as a double, so widen to one and round once into the
 * target by graphrun_kernel.h's rules (to float16 and bfloat16 through float32). */
template <typename T> __device__ static inline double widen(const void *p, uint64_t i)
{
    return (double)((const T *)p)[i];
}
template <> __device__ inline double widen<f16_t>(const void *p, uint64_t i)
{
    return gr_f16_to_f32(((const unsigned short *)p)[i]);
}
template <> __device__ inline double widen<bf16_t>(const void *p, uint64_t i)
{
    return gr_bf16_to_f32(((const unsigned short *)p)[i]);
}

template <typename F, typename T> struct narrow {
    static __device__ void store(void *p, uint64_t i, double v) { ((T *)p)[i] = (T)v; }
};
template <typename F> struct narrow<F, float> {
    static __device__ void store(void *p, uint64_t i, double v)
    {
        ((float *)p)[i] = __double2float_rn(v);
    }
};
template <typename F> struct narrow<F, f16_t> {
    static __device__ void store(void *p, uint64_t i, double v)
    {
        ((unsigned short *)p)[i] = gr_f32_to_f16(__double2float_rn(v));
    }
};
template <typename F> struct narrow<F, bf16_t> {
    static __device__ void store(void *p, uint64_t i, double v)
    {
        ((unsigned short *)p)[i] = gr_f32_to_bf16(__double2float_rn(v));
    }
};
template <typename F> struct narrow<F, int32_t> {
    static __device__ void store(void *p, uint64_t i, double v)
    {
        ((int32_t *)p)[i] = gr_f64_to_i32(v);
    }
};
template <typename F> struct narrow<F, uint8_t> {
    static __device__ void store(void *p, uint64_t i, double v)
    {
        ((uint8_t *)p)[i] = gr_f64_to_u8(v);
    }
};
template <> struct narrow<int32_t, uint8_t> { /* integers wrap, as NumPy's astype */
    static __device__ void store(void *p, uint64_t i, double v)
    {
        ((uint8_t *)p)[i] = (uint8_t)(uint32_t)(int32_t)v;
    }
};

template <typename F, typename T> __global__ void cast_kernel(gr_kernel_args a)
{
    GRID_STRIDE_LOOP(i, a.n) narrow<F, T>::store(a.out, i, widen<F>(a.in[0], i));
}

/* The tables, indexed by gr_dtype (float32 is cpu.c's and builtin_cuda.cu's own). */
#define TYPED_ROW(op)                                                                       \
    {NULL, (const void *)typed_kernel<op, f16_t>, (const void *)typed_kernel<op, bf16_t>,   \
     (const void *)typed_kernel<op, double>, NULL, NULL}

static const void *const typed_table[GR_OP_COUNT_][GR_DTYPE_COUNT_] = {
    TYPED_ROW(GR_OP_MUL),   TYPED_ROW(GR_OP_ADD),     TYPED_ROW(GR_OP_POW),
    TYPED_ROW(GR_OP_AXPBY), TYPED_ROW(GR_OP_SUB),     TYPED_ROW(GR_OP_DIV),
    TYPED_ROW(GR_OP_EXP),   TYPED_ROW(GR_OP_LOG),     TYPED_ROW(GR_OP_TANH),
    TYPED_ROW(GR_OP_SIGMOID), TYPED_ROW(GR_OP_CLAMP), TYPED_ROW(GR_OP_MUL2),
    TYPED_ROW(GR_OP_ADD2),
};

#define CAST_ROW(F)                                                                         \
    {(const void *)cast_kernel<F, float>, (const void *)cast_kernel<F, f16_t>,              \
     (const void *)cast_kernel<F, bf16_t>, (const void *)cast_kernel<F, double>,            \
     (const void *)cast_kernel<F, int32_t>, (const void *)cast_kernel<F, uint8_t>}

/* Rows and columns in gr_dtype's order: float32, float16, bfloat16, float64, int32, uint8. */
static const void *const cast_table[GR_DTYPE_COUNT_][GR_DTYPE_COUNT_] = {
    CAST_ROW(float), CAST_ROW(f16_t),   CAST_ROW(bf16_t),
    CAST_ROW(double), CAST_ROW(int32_t), CAST_ROW(uint8_t),
};

extern "C" const void *gr__cuda_typed_entry(gr_typed_op op, gr_dtype type)
{
    if ((unsigned)op >= GR_OP_COUNT_ || (unsigned)type >= GR_DTYPE_COUNT_)
        return NULL;
    return typed_table[op][type];
}

extern "C" const void *gr__cuda_cast_entry(gr_dtype from, gr_dtype to)
{
    if ((unsigned)from >= GR_DTYPE_COUNT_ || (unsigned)to >= GR_DTYPE_COUNT_)
        return NULL;
    return cast_table[from][to];
}
