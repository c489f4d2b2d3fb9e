// A device function with Numba's foreign-function ABI (result pointer first, then the
// arguments; returns 0), for cuda.declare_device(..., link="examples/cuda_c/functions.cu").
extern "C" __device__ int mul_f32_f32(float *result, float a, float b) {
    *result = a * b;
    return 0;
}
