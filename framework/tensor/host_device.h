#pragma once
// CMHA_HOST_DEVICE marks a function that both the C++ compiler and nvcc
// compile: the math of a kernel written once, run by the CPU build's tests and
// by the CUDA kernels (so a GPU result can only differ where the hardware's
// arithmetic does, never where a formula was copied wrong).
#if defined(__CUDACC__)
#define CMHA_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define CMHA_HOST_DEVICE inline
#endif
