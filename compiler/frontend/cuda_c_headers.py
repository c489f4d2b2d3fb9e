"""What CUDA's headers give a kernel that the CUDA C front end parses without them: the prelude
it includes first (the keywords, the built-in variables, the warp, atomic and group functions,
the fixed-width types, ``CUDART_VERSION`` and the limits), and the stand-ins with content for the
headers kernels include by name (``<cooperative_groups.h>``). The math library's part is
:mod:`.cuda_c_math`'s, the vector types' :mod:`.cuda_c_memory`'s."""

from __future__ import annotations

PRELUDE = r"""
#define __global__ __attribute__((global))
#define __device__ __attribute__((device))
#define __host__ __attribute__((host))
#define __shared__ __attribute__((shared))
#define __constant__ __attribute__((constant))
#define __forceinline__ inline
#define __noinline__
#define __launch_bounds__(...)
#define __CUDACC__ 1
typedef unsigned long size_t;
typedef long ptrdiff_t; typedef long intptr_t; typedef unsigned long uintptr_t;
typedef signed char int8_t; typedef short int16_t; typedef int int32_t; typedef long long int64_t;
typedef unsigned char uint8_t; typedef unsigned short uint16_t; typedef unsigned int uint32_t;
typedef unsigned long long uint64_t; typedef unsigned int uint; typedef unsigned short ushort;
typedef unsigned char uchar; typedef unsigned long ulong;
#define CUDART_VERSION 12000
#define NULL __null
#define __CUDACC_VER_MAJOR__ 12
#define __CUDACC_VER_MINOR__ 0
#define CUDART_INF_F 1e39f
#define CUDART_INF 1e309
#define INFINITY CUDART_INF_F
#define HUGE_VALF CUDART_INF_F
#define HUGE_VAL CUDART_INF
#define CUDART_PI_F 3.141592654f
#define CUDART_PI 3.1415926535897931e+0
#define M_PI 3.14159265358979323846
#define M_PI_2 1.57079632679489661923
#define M_E 2.7182818284590452354
#define M_SQRT2 1.41421356237309504880
#define M_LN2 0.69314718055994530942
#define FLT_MAX 3.402823466e+38f
#define FLT_MIN 1.175494351e-38f
#define FLT_EPSILON 1.192092896e-07f
#define DBL_MAX 1.7976931348623158e+308
#define DBL_MIN 2.2250738585072014e-308
#define DBL_EPSILON 2.2204460492503131e-016
#define CHAR_BIT 8
#define INT_MAX 2147483647
#define INT_MIN (-2147483647 - 1)
#define UINT_MAX 0xffffffffu
#define LLONG_MAX 9223372036854775807ll
#define LLONG_MIN (-9223372036854775807ll - 1)
#define ULLONG_MAX 0xffffffffffffffffull
struct __hetero_uint3 { unsigned int x, y, z; };
extern const __device__ __hetero_uint3 threadIdx, blockIdx, blockDim, gridDim;
extern const __device__ int warpSize;
__device__ void __syncthreads();
__device__ void __threadfence();
__device__ void __threadfence_block();
__device__ void __threadfence_system();
__device__ unsigned int __ballot_sync(unsigned int, int);
__device__ int __all_sync(unsigned int, int);
__device__ int __any_sync(unsigned int, int);
__device__ unsigned int __activemask();
__device__ void __syncwarp(unsigned int = 0xffffffffu);
#define __HETERO_SHFL(name) \
  __device__ int name(unsigned int, int, int, int = 32); \
  __device__ unsigned int name(unsigned int, unsigned int, int, int = 32); \
  __device__ long long name(unsigned int, long long, int, int = 32); \
  __device__ unsigned long long name(unsigned int, unsigned long long, int, int = 32); \
  __device__ float name(unsigned int, float, int, int = 32); __device__ double name(unsigned int, double, int, int = 32);
__HETERO_SHFL(__shfl_sync) __HETERO_SHFL(__shfl_up_sync) __HETERO_SHFL(__shfl_down_sync) __HETERO_SHFL(__shfl_xor_sync)
#define __HETERO_ATOMIC(name) \
  __device__ int name(int*, int); __device__ unsigned int name(unsigned int*, unsigned int); \
  __device__ unsigned long long name(unsigned long long*, unsigned long long); \
  __device__ long long name(long long*, long long); __device__ float name(float*, float); \
  __device__ double name(double*, double);
__HETERO_ATOMIC(atomicAdd) __HETERO_ATOMIC(atomicSub) __HETERO_ATOMIC(atomicExch) __HETERO_ATOMIC(atomicMin)
__HETERO_ATOMIC(atomicMax) __HETERO_ATOMIC(atomicAnd) __HETERO_ATOMIC(atomicOr) __HETERO_ATOMIC(atomicXor)
__device__ unsigned int atomicInc(unsigned int*, unsigned int);
__device__ unsigned int atomicDec(unsigned int*, unsigned int);
__device__ int atomicCAS(int*, int, int);
__device__ unsigned int atomicCAS(unsigned int*, unsigned int, unsigned int);
__device__ unsigned long long atomicCAS(unsigned long long*, unsigned long long, unsigned long long);
__device__ unsigned int __umul24(unsigned int, unsigned int); __device__ int __mul24(int, int);
__device__ int min(int, int); __device__ unsigned int min(unsigned int, unsigned int);
__device__ long long min(long long, long long); __device__ float min(float, float); __device__ double min(double, double);
__device__ int max(int, int); __device__ unsigned int max(unsigned int, unsigned int);
__device__ long long max(long long, long long); __device__ float max(float, float); __device__ double max(double, double);
"""

#: Stand-ins with content: what kernels use of these headers, declared for the front end to lower.
KNOWN_HEADERS = {
    "cooperative_groups.h": """
#pragma once
namespace cooperative_groups {
struct thread_block {
    __device__ void sync() const; __device__ unsigned long long thread_rank() const;
    __device__ unsigned long long size() const; __device__ unsigned long long num_threads() const;
};
struct grid_group { __device__ void sync() const; };
template <unsigned int Size> struct thread_block_tile {
    __device__ void sync() const; __device__ unsigned long long thread_rank() const;
    __device__ unsigned long long size() const; __device__ unsigned long long num_threads() const;
    __device__ unsigned long long meta_group_rank() const; __device__ unsigned long long meta_group_size() const;
    template <class T> __device__ T shfl(T value, int source) const;
    template <class T> __device__ T shfl_up(T value, unsigned int delta) const;
    template <class T> __device__ T shfl_down(T value, unsigned int delta) const;
    template <class T> __device__ T shfl_xor(T value, unsigned int mask) const;
    __device__ int any(int predicate) const; __device__ int all(int predicate) const;
    __device__ unsigned int ballot(int predicate) const;
};
template <unsigned int Size, class Parent> __device__ thread_block_tile<Size> tiled_partition(const Parent&);
__device__ thread_block this_thread_block();
__device__ grid_group this_grid();
__device__ void sync(const thread_block&);
__device__ void sync(const grid_group&);
template <class T> struct plus { __device__ T operator()(T, T) const; };
template <class T> struct less { __device__ T operator()(T, T) const; };
template <class T> struct greater { __device__ T operator()(T, T) const; };
template <class T> struct bit_and { __device__ T operator()(T, T) const; };
template <class T> struct bit_or { __device__ T operator()(T, T) const; };
template <class T> struct bit_xor { __device__ T operator()(T, T) const; };
template <class Group, class T, class Op> __device__ T reduce(const Group&, T, Op);
}
""",
    "cooperative_groups/reduce.h": "#pragma once\n",  # cg::reduce is declared with the groups above
}
