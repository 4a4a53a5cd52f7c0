// The collective tests' reference on the host (coll_fixture.h and the coll_*_test.cc files,
// one binary): element types and their data, the expected results of every operation,
// all-to-all-v layouts, and the operations as the tests name them.
#ifndef SYMCOMM_TESTS_MP_COLL_REFERENCE_H_
#define SYMCOMM_TESTS_MP_COLL_REFERENCE_H_

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "mp.h"

// A named namespace: every file of the binary must see the same definitions.
namespace coll_test {

struct Type {
  symcommDataType_t id;
  size_t size;
  bool is_signed;
  const char* name;
};
inline const Type kTypes[] = {
    {symcommInt8, 1, true, "int8"},       {symcommInt32, 4, true, "int32"},
    {symcommUint64, 8, false, "uint64"},  {symcommInt64, 8, true, "int64"},
    {symcommFloat16, 2, true, "float16"}, {symcommBfloat16, 2, true, "bfloat16"},
    {symcommFloat32, 4, true, "float32"}, {symcommFloat64, 8, true, "float64"},
    {symcommFloat8E4M3, 1, true, "fp8_e4m3"}, {symcommFloat8E5M2, 1, true, "fp8_e5m2"}};

// "" where got == want, else which elements of `elem` bytes differ (the first few, in hex).
inline std::string differences(const std::vector<uint8_t>& got, const std::vector<uint8_t>& want,
                        size_t elem) {
  if (got == want) return "";
  if (got.size() != want.size())
    return "got " + std::to_string(got.size()) + " bytes, want " + std::to_string(want.size());
  std::string out;
  size_t wrong = 0;
  char buf[64];
  for (size_t i = 0; i < got.size() / elem; ++i) {
    if (std::memcmp(&got[i * elem], &want[i * elem], elem) == 0) continue;
    if (++wrong > 4) continue;
    out += "element " + std::to_string(i) + ": got 0x";
    for (size_t k = elem; k-- > 0;) { std::snprintf(buf, sizeof buf, "%02x", got[i * elem + k]); out += buf; }
    out += " want 0x";
    for (size_t k = elem; k-- > 0;) { std::snprintf(buf, sizeof buf, "%02x", want[i * elem + k]); out += buf; }
    out += "; ";
  }
  return out + std::to_string(wrong) + " of " + std::to_string(got.size() / elem) + " differ";
}

// Small integers: exact in every type, and their sums over a few ranks too: in -8..8 (0..16
// unsigned), and for the 8-bit floats in -1..1, whose sums and products over 8 ranks e5m2
// still holds exactly (integers up to 8), so that no algorithm's order of combination rounds.
inline double value(uint64_t seed, int rank, size_t i, const Type& t) {
  uint64_t x = seed ^ (static_cast<uint64_t>(rank) + 1) * 0x9e3779b97f4a7c15ull ^ i * 0xbf58476d1ce4e5b9ull;
  x ^= x >> 29;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 32;
  if (t.size == 1 && t.id != symcommInt8 && t.id != symcommUint8)
    return static_cast<double>(static_cast<int>(x % 3) - 1);
  return t.is_signed ? static_cast<double>(static_cast<int>(x % 17) - 8) : static_cast<double>(x % 17);
}

inline void store(const Type& t, uint8_t* p, double v) {
  switch (t.id) {
    case symcommInt8: { int8_t x = static_cast<int8_t>(v); std::memcpy(p, &x, 1); break; }
    case symcommInt32: { int32_t x = static_cast<int32_t>(v); std::memcpy(p, &x, 4); break; }
    case symcommUint64: { uint64_t x = static_cast<uint64_t>(v); std::memcpy(p, &x, 8); break; }
    case symcommInt64: { int64_t x = static_cast<int64_t>(v); std::memcpy(p, &x, 8); break; }
    case symcommFloat16: { __half x = __float2half_rn(static_cast<float>(v)); std::memcpy(p, &x, 2); break; }
    case symcommBfloat16: { __nv_bfloat16 x = __float2bfloat16_rn(static_cast<float>(v)); std::memcpy(p, &x, 2); break; }
    case symcommFloat32: { float x = static_cast<float>(v); std::memcpy(p, &x, 4); break; }
    case symcommFloat8E4M3: { __nv_fp8_e4m3 x(static_cast<float>(v)); std::memcpy(p, &x, 1); break; }
    case symcommFloat8E5M2: { __nv_fp8_e5m2 x(static_cast<float>(v)); std::memcpy(p, &x, 1); break; }
    default: { std::memcpy(p, &v, 8); break; }
  }
}

inline std::vector<uint8_t> make(const Type& t, uint64_t seed, int rank, size_t first, size_t n) {
  std::vector<uint8_t> out(n * t.size);
  for (size_t i = 0; i < n; ++i) store(t, &out[i * t.size], value(seed, rank, first + i, t));
  return out;
}

inline double combine(symcommRedOp_t op, double a, double b);
inline double load(const Type& t, const uint8_t* p);

// Elements [first, first + n) of make()'s data combined by `op` over ranks 0, step, 2 step,
// ... below `nranks`, in that order.
// Integers wrap around in their width (a product of int8s); an average is the sum divided by
// the members, with C's integer division for integers and in float (double for float64) for
// floats, as symcomm/coll.h says. The data are small integers: sums and products of floats
// are exact in double and in float (at most 8 ranks of |v| <= 16: below 2^32, and 2^24 for
// the signed values floats hold).
inline std::vector<uint8_t> reduced(const Type& t, symcommRedOp_t op, uint64_t seed, int nranks,
                             size_t first, size_t n, int step = 1) {
  std::vector<uint8_t> out(n * t.size);
  const bool integer = t.id != symcommFloat16 && t.id != symcommBfloat16 &&
                       t.id != symcommFloat32 && t.id != symcommFloat64 &&
                       t.id != symcommFloat8E4M3 && t.id != symcommFloat8E5M2;
  const int members = (nranks + step - 1) / step;
  for (size_t i = 0; i < n; ++i) {
    double acc = value(seed, 0, first + i, t);
    uint64_t bits = static_cast<uint64_t>(static_cast<int64_t>(acc));  // integers, wrapping
    for (int r = step; r < nranks; r += step) {
      const double v = value(seed, r, first + i, t);
      acc = combine(op, acc, v);
      const uint64_t w = static_cast<uint64_t>(static_cast<int64_t>(v));
      bits = op == symcommProd ? bits * w : bits + w;
    }
    if (integer && op == symcommProd) {
      std::memcpy(&out[i * t.size], &bits, t.size);  // the low bytes (little-endian)
      continue;
    }
    if (op == symcommAvg) {
      if (integer)
        acc = t.is_signed ? static_cast<double>(static_cast<int64_t>(acc) / members)
                          : static_cast<double>(static_cast<uint64_t>(acc) / static_cast<uint64_t>(members));
      else if (t.size == 8)
        acc = acc / members;
      else {
        // The sum as the type holds it (the sum is formed, then divided): exact for the
        // 16-bit floats here; an fp8 sum rounds.
        uint8_t sum[8];
        store(t, sum, acc);
        acc = static_cast<double>(static_cast<float>(load(t, sum)) / static_cast<float>(members));
      }
    }
    store(t, &out[i * t.size], acc);
  }
  return out;
}

inline double combine(symcommRedOp_t op, double a, double b) {
  switch (op) {
    case symcommMin: return std::min(a, b);
    case symcommMax: return std::max(a, b);
    case symcommProd: return a * b;
    default: return a + b;  // sum, and the average's sum
  }
}

// "auto" (the selection) and every registered algorithm.
inline std::vector<std::string> algorithms() {
  std::vector<std::string> v = {"auto"};
  for (int i = 0; i < symcommCollAlgorithmCount(); ++i) v.push_back(symcommCollAlgorithmName(i));
  return v;
}

// Element i of a buffer of type t, as a double.
inline double load(const Type& t, const uint8_t* p) {
  switch (t.id) {
    case symcommFloat16: { __half x; std::memcpy(&x, p, 2); return __half2float(x); }
    case symcommBfloat16: { __nv_bfloat16 x; std::memcpy(&x, p, 2); return __bfloat162float(x); }
    case symcommFloat32: { float x; std::memcpy(&x, p, 4); return x; }
    case symcommFloat64: { double x; std::memcpy(&x, p, 8); return x; }
    case symcommFloat8E4M3: { __nv_fp8_e4m3 x; std::memcpy(&x, p, 1); return static_cast<float>(x); }
    case symcommFloat8E5M2: { __nv_fp8_e5m2 x; std::memcpy(&x, p, 1); return static_cast<float>(x); }
    default: ADD_FAILURE() << "load() reads floating-point types only"; return 0;
  }
}

inline const size_t kCounts[] = {0, 1, 7, 1001, 50001, 300000};

// What this rank receives from make()'s data of `seed`: an all-gather of `count` elements,
// and (as member `me`) an all-to-all of blocks of `count`.
inline std::vector<uint8_t> gathered(const Type& t, uint64_t seed, int n, size_t count) {
  std::vector<uint8_t> want;
  for (int r = 0; r < n; ++r) {
    auto part = make(t, seed, r, 0, count);
    want.insert(want.end(), part.begin(), part.end());
  }
  return want;
}

inline std::vector<uint8_t> exchanged(const Type& t, uint64_t seed, int n, int me, size_t count) {
  std::vector<uint8_t> want;
  for (int r = 0; r < n; ++r) {
    auto part = make(t, seed, r, static_cast<size_t>(me) * count, count);
    want.insert(want.end(), part.begin(), part.end());
  }
  return want;
}

// The count matrix of all-to-all-v tests: member i sends counts[i][j] elements to member j,
// from a send buffer laid out with gaps, into a receive buffer laid out in reverse order.
struct VLayout {
  std::vector<std::vector<size_t>> counts;
  std::vector<size_t> sends(int me) const { return counts[static_cast<size_t>(me)]; }
  std::vector<size_t> receives(int me) const {
    std::vector<size_t> r(counts.size());
    for (size_t i = 0; i < counts.size(); ++i) r[i] = counts[i][static_cast<size_t>(me)];
    return r;
  }
  std::vector<size_t> sdispls(int i) const {
    std::vector<size_t> d(counts.size());
    size_t at = 5;
    for (size_t j = 0; j < counts.size(); ++j) { d[j] = at; at += counts[static_cast<size_t>(i)][j] + 3; }
    return d;
  }
  std::vector<size_t> rdispls(int me) const {
    std::vector<size_t> d(counts.size());
    size_t at = 0;
    for (size_t k = counts.size(); k-- > 0;) { d[k] = at; at += counts[k][static_cast<size_t>(me)] + 1; }
    return d;
  }
  static size_t extent(const std::vector<size_t>& displs, const std::vector<size_t>& n) {
    size_t e = 0;
    for (size_t j = 0; j < n.size(); ++j) e = std::max(e, displs[j] + n[j]);
    return e;
  }
  // What member `me` receives from make()'s data of `seed` into a receive buffer of `elems`
  // elements poisoned with 0xAB (the gaps keep the poison).
  std::vector<uint8_t> received(const Type& t, uint64_t seed, int me, size_t elems) const {
    std::vector<uint8_t> want(elems * t.size, 0xAB);
    const std::vector<size_t> rd = rdispls(me);
    for (size_t i = 0; i < counts.size(); ++i) {
      const int sender = static_cast<int>(i);
      auto part = make(t, seed, sender, sdispls(sender)[static_cast<size_t>(me)],
                       counts[i][static_cast<size_t>(me)]);
      std::copy(part.begin(), part.end(), want.begin() + static_cast<long>(rd[i] * t.size));
    }
    return want;
  }
};

inline VLayout random_layout(uint64_t seed, int n, size_t max_count) {
  std::mt19937_64 rng(seed);
  VLayout v;
  v.counts.assign(static_cast<size_t>(n), std::vector<size_t>(static_cast<size_t>(n)));
  for (auto& row : v.counts)
    for (size_t& c : row) c = max_count == 0 || rng() % 4 == 0 ? 0 : rng() % max_count;
  return v;
}

// The operations, as the tests name them: all-to-all-v with counts on the host or device.
enum class Op {
  AllGather, AllToAll, AllToAllv, AllToAllvDevice, ReduceScatter, AllReduce, Broadcast,
  Reduce, Gather, Scatter
};
// The operation as the C API numbers it (both all-to-all-v's: symcommCollAllToAllv).
inline symcommCollOp_t api_op(Op op) {
  switch (op) {
    case Op::AllGather: return symcommCollAllGather;
    case Op::AllToAll: return symcommCollAllToAll;
    case Op::ReduceScatter: return symcommCollReduceScatter;
    case Op::AllReduce: return symcommCollAllReduce;
    case Op::Broadcast: return symcommCollBroadcast;
    case Op::Reduce: return symcommCollReduce;
    case Op::Gather: return symcommCollGather;
    case Op::Scatter: return symcommCollScatter;
    default: return symcommCollAllToAllv;
  }
}

}  // namespace coll_test

#endif  // SYMCOMM_TESTS_MP_COLL_REFERENCE_H_
