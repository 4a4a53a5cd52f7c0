// Element-wise reduction of n equally spaced blocks, the same arithmetic on the CPU and in
// kernels: values are accumulated in rank order, 16-bit floats in float and rounded once.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "symcomm/symcomm.h"

#ifdef __CUDACC__
#define SYMCOMM_RHD __host__ __device__ __forceinline__
#else
#define SYMCOMM_RHD inline
#endif

namespace symcomm {

// How an element type is accumulated: in itself, or in float for 16- and 8-bit floats.
template <typename T> struct Accum { using type = T; };
template <> struct Accum<__half> { using type = float; };
template <> struct Accum<__nv_bfloat16> { using type = float; };
template <> struct Accum<__nv_fp8_e4m3> { using type = float; };
template <> struct Accum<__nv_fp8_e5m2> { using type = float; };

template <typename T> SYMCOMM_RHD typename Accum<T>::type widen(T v) { return v; }
template <> SYMCOMM_RHD float widen<__half>(__half v) { return __half2float(v); }
template <> SYMCOMM_RHD float widen<__nv_bfloat16>(__nv_bfloat16 v) { return __bfloat162float(v); }
template <> SYMCOMM_RHD float widen<__nv_fp8_e4m3>(__nv_fp8_e4m3 v) { return static_cast<float>(v); }
template <> SYMCOMM_RHD float widen<__nv_fp8_e5m2>(__nv_fp8_e5m2 v) { return static_cast<float>(v); }

template <typename T> SYMCOMM_RHD T narrow(typename Accum<T>::type v) { return v; }
template <> SYMCOMM_RHD __half narrow<__half>(float v) { return __float2half_rn(v); }
template <> SYMCOMM_RHD __nv_bfloat16 narrow<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }
// Rounded to nearest, saturated to the largest finite value (CUDA's conversion).
template <> SYMCOMM_RHD __nv_fp8_e4m3 narrow<__nv_fp8_e4m3>(float v) { return __nv_fp8_e4m3(v); }
template <> SYMCOMM_RHD __nv_fp8_e5m2 narrow<__nv_fp8_e5m2>(float v) { return __nv_fp8_e5m2(v); }

// Min and max of floats do not depend on the order of the operands, so every algorithm and
// every rank order gives the same bits: a NaN is dropped unless both are NaN (as fmin and
// fmax, and NCCL, do), and -0 is below +0.
template <typename A> SYMCOMM_RHD A pick(bool min, A a, A b) {
  if (min ? b < a : a < b) return b;
  return a;
}
template <typename A> SYMCOMM_RHD bool sign_bit(A v) {
  using Bits = typename std::conditional<sizeof(A) == 8, uint64_t, uint32_t>::type;
  Bits bits;
  memcpy(&bits, &v, sizeof bits);
  return (bits >> (8 * sizeof bits - 1)) != 0;
}
template <typename A> SYMCOMM_RHD A pick_float(bool min, A a, A b) {
  if (b != b) return a;  // NaN
  if (a != a) return b;
  if (a == b) return sign_bit(a) == min ? a : b;  // equal, or zeros of either sign
  return pick(min, a, b);
}
// Integers: in the unsigned type of their width, so that an overflow wraps around (two's
// complement) rather than being undefined.
template <typename A> SYMCOMM_RHD A combine(symcommRedOp_t op, A a, A b) {
  using U = typename std::make_unsigned<A>::type;
  const U x = static_cast<U>(a), y = static_cast<U>(b);
  if (op == symcommSum || op == symcommAvg) return static_cast<A>(static_cast<U>(x + y));
  if (op == symcommProd) return static_cast<A>(static_cast<U>(x * y));
  return pick(op == symcommMin, a, b);
}
template <> SYMCOMM_RHD float combine<float>(symcommRedOp_t op, float a, float b) {
  if (op == symcommSum || op == symcommAvg) return a + b;
  if (op == symcommProd) return a * b;
  return pick_float(op == symcommMin, a, b);
}
template <> SYMCOMM_RHD double combine<double>(symcommRedOp_t op, double a, double b) {
  if (op == symcommSum || op == symcommAvg) return a + b;
  if (op == symcommProd) return a * b;
  return pick_float(op == symcommMin, a, b);
}

// dst[i] = op over k < n of the element i of block k (blocks `stride` bytes apart).
template <typename T>
SYMCOMM_RHD void reduce_one(T* dst, const char* src, size_t stride, int n, size_t i,
                            symcommRedOp_t op) {
  typename Accum<T>::type acc = widen(reinterpret_cast<const T*>(src)[i]);
  for (int k = 1; k < n; ++k)
    acc = combine(op, acc, widen(reinterpret_cast<const T*>(src + static_cast<size_t>(k) * stride)[i]));
  dst[i] = narrow<T>(acc);
}

// v[i] /= n: the last step of symcommAvg (symcomm/coll.h says in which type).
template <typename T> SYMCOMM_RHD void divide_one(T* v, size_t i, int n) {
  v[i] = narrow<T>(widen(v[i]) / static_cast<typename Accum<T>::type>(n));
}

// dst[i] = src[i] * factor: a pre-multiplied sum's product, in the accumulation type and
// rounded once (integers wrap around).
template <typename T> SYMCOMM_RHD void scale_one(T* dst, const T* src, size_t i, T factor) {
  dst[i] = narrow<T>(combine(symcommProd, widen(src[i]), widen(factor)));
}

// Calls f(T{}) with the C++ type T of `type` (on the host, to pick a kernel or a loop).
template <typename F>
inline void with_type(symcommDataType_t type, F&& f) {
  switch (type) {
    case symcommInt8: f(int8_t{}); break;
    case symcommUint8: f(uint8_t{}); break;
    case symcommInt32: f(int32_t{}); break;
    case symcommUint32: f(uint32_t{}); break;
    case symcommInt64: f(int64_t{}); break;
    case symcommUint64: f(uint64_t{}); break;
    case symcommFloat16: f(__half{}); break;
    case symcommBfloat16: f(__nv_bfloat16{}); break;
    case symcommFloat32: f(float{}); break;
    case symcommFloat64: f(double{}); break;
    case symcommFloat8E4M3: f(__nv_fp8_e4m3{}); break;
    case symcommFloat8E5M2: f(__nv_fp8_e5m2{}); break;
    default: break;
  }
}

}  // namespace symcomm
