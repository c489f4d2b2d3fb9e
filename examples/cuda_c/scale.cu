// A kernel template, instantiated by name through RawModule(name_expressions=["scale<3>"]).
template <int FACTOR>
__global__ void scale(float *x, int n) {
    int i = blockDim.x * blockIdx.x + threadIdx.x;
    if (i < n) {
        x[i] = x[i] * FACTOR;
    }
}
