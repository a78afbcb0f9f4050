// user_kernel.cu: kernels of a user's own, in CUDA C, for graphrun to compile with NVRTC at
// run time (graph/examples/user_kernel.graph names this file; `graphrun run --kernels
// user_kernel.cu` registers it too). The declaration lines say each kernel's signature.
#include "graphrun_kernel.h"

// graphrun: kernel scaled_square inputs=1 scalars=1 elementwise
// out = s0 * x * x, element by element, so graphrun may cut a tensor into chunks and pack
// small tensors into batches.
extern "C" __global__ void scaled_square(gr_kernel_args a)
{
    float s = a.s[0].f32;

    GR_FOR_EACH(i, a)
    {
        float x = GR_IN(a, 0, float)[i];
        GR_OUT(a, float)[i] = __fmul_rn(__fmul_rn(x, x), s);
    }
}

// graphrun: kernel relu inputs=1 elementwise
extern "C" __global__ void relu(gr_kernel_args a)
{
    GR_FOR_EACH(i, a) GR_OUT(a, float)[i] = fmaxf(GR_IN(a, 0, float)[i], 0.0f);
}
