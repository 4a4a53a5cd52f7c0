// What the fused layer's tests share (fused_test.cc, fused_graph_test.cc): exact values in
// half precision, a CPU reference of the GEMMs, plans and workspaces made over the world.
// Inputs are multiples of 1/8 in [-2, 2]: exact in float16 and bfloat16, and every product
// and partial sum here is exact in fp32, so a float32 C must be exact and a half-precision C
// within one unit in its last place.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "mp.h"
#include "symcomm/fused.h"

namespace {

using Type = symcommDataType_t;
using Vec = std::vector<double>;

// For helpers that return a value, where SC_OK's ASSERT cannot be used.
#define EXPECT_OK(call) \
  do { EXPECT_EQ((call), symcommSuccess) << #call << ": " << symcommGetLastError(); } while (0)

const Type kHalves[] = {symcommFloat16, symcommBfloat16};
const Type kOutputs[] = {symcommFloat16, symcommBfloat16, symcommFloat32};

size_t esize(Type t) { return t == symcommFloat32 ? 4 : 2; }
const char* tname(Type t) {
  return t == symcommFloat32 ? "f32" : t == symcommFloat16 ? "f16" : "bf16";
}
// Relative error allowed in C: one unit in the last place of the type.
double ulp(Type t) {
  return t == symcommFloat32 ? 0 : t == symcommFloat16 ? 1.0 / 1024 : 1.0 / 128;
}

// Values exact in the type: float16 from frexp (normal numbers and zero only), bfloat16 as a
// float's top half.
std::vector<uint8_t> encode(const Vec& v, Type t) {
  std::vector<uint8_t> out(v.size() * esize(t));
  for (size_t i = 0; i < v.size(); ++i) {
    const float f = static_cast<float>(v[i]);
    uint32_t u;
    std::memcpy(&u, &f, 4);
    int e = 0;
    const double m = std::frexp(std::fabs(v[i]), &e);  // |v| = m 2^e, m in [0.5, 1)
    const long bits = (v[i] < 0 ? 0x8000 : 0) | (e + 14) << 10 | std::lround((2 * m - 1) * 1024);
    const uint16_t h = static_cast<uint16_t>(t == symcommBfloat16 ? u >> 16 : v[i] == 0 ? 0 : bits);
    std::memcpy(&out[i * esize(t)], t == symcommFloat32 ? static_cast<const void*>(&f) : &h,
                esize(t));
  }
  return out;
}

Vec decode(const std::vector<uint8_t>& b, Type t) {
  Vec v(b.size() / esize(t));
  for (size_t i = 0; i < v.size(); ++i) {
    uint32_t u = 0;  // float32 bits; float16 and bfloat16 bits in the low half
    std::memcpy(&u, &b[i * esize(t)], esize(t));
    if (t == symcommBfloat16) u <<= 16;
    float f;
    std::memcpy(&f, &u, 4);
    const int e = (u >> 10) & 31, m = u & 1023;
    const double h = e == 31 ? (m ? NAN : INFINITY)
                     : e     ? std::ldexp(1024 + m, e - 25)
                             : std::ldexp(m, -24);
    v[i] = t != symcommFloat16 ? f : (u & 0x8000) ? -h : h;
  }
  return v;
}

// Element `i` of matrix `what` (of member `who`, where each has its own): a multiple of 1/8
// in [-2, 2], the same on every rank for one seed.
double val(uint64_t seed, uint64_t what, uint64_t who, uint64_t i) {
  uint64_t x = seed;
  for (uint64_t part : {what, who, i}) {
    x += part + 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    x ^= x >> 31;
  }
  return static_cast<double>(static_cast<int>(x % 33) - 16) / 8;
}

// Rows [r0, r0 + nr) and columns [c0, c0 + nc) of the row-major matrix m of `ld` columns,
// or their transpose.
Vec block(const Vec& m, int64_t ld, int64_t r0, int64_t nr, int64_t c0, int64_t nc,
          bool transpose = false) {
  Vec out(static_cast<size_t>(nr * nc));
  for (int64_t i = 0; i < nr; ++i)
    for (int64_t j = 0; j < nc; ++j)
      out[transpose ? j * nr + i : i * nc + j] = m[(r0 + i) * ld + c0 + j];
  return out;
}

// Expects got == want within ulp(t) relative (NaN, the poison, never passes); names the
// first few elements that differ by row and column.
void expect_near(const Vec& got, const Vec& want, Type t, int64_t cols, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  size_t bad = 0;
  for (size_t i = 0; i < want.size(); ++i)
    if (!(std::fabs(got[i] - want[i]) <= ulp(t) * std::fabs(want[i])) && bad++ < 4)
      ADD_FAILURE() << what << " [" << i / cols << ", " << i % cols << "] holds " << got[i]
                    << ", expected " << want[i];
  EXPECT_EQ(bad, 0u) << what << ": elements wrong";
}

// A buffer of the space under test holding `v` (16 bytes at least: an empty block is still
// a valid pointer).
void* upload(const std::vector<uint8_t>& v) {
  void* p = mp::local_alloc(std::max<size_t>(v.size(), 16));
  mp::store(p, v);
  return p;
}
// 0xFF bytes: NaN in float16, bfloat16 and float32 alike.
std::vector<uint8_t> poison(size_t bytes) { return std::vector<uint8_t>(bytes, 0xFF); }

// Creates the plan on the team's members (every world rank calls). False on every rank where
// the cuda space has no implementation for it (*skip says why); the host space must have one.
bool create(symcommTeam_t team, bool member, const symcommFusedConfig_t& c,
            symcommFusedPlan_t* plan, std::string* skip) {
  *plan = nullptr;
  symcommResult_t rc = symcommSuccess;
  if (member) rc = symcommFusedPlanCreate(mp::world(), team, &c, plan);
  if (rc == symcommNotSupported && mp::space() == symcommSpaceCuda) *skip = symcommGetLastError();
  else EXPECT_EQ(rc, symcommSuccess) << symcommGetLastError();
  if (mp::all_ok(rc == symcommSuccess)) return true;
  if (*plan) EXPECT_OK(symcommFusedPlanDestroy(*plan));
  *plan = nullptr;
  return false;
}

// The plan's workspace (plan NULL off its team), allocated over the world, which symcommMalloc
// needs: every member reports the same size. Dirty, as the heap gives it. NULL for 0 bytes.
void* alloc_workspace(symcommFusedPlan_t plan, size_t* bytes = nullptr) {
  int64_t mine = -1, size = -1;
  if (plan) {
    size_t b = 0;
    EXPECT_OK(symcommFusedWorkspaceSize(plan, &b));
    mine = static_cast<int64_t>(b);
  }
  std::vector<int64_t> all(static_cast<size_t>(mp::nranks()));
  EXPECT_OK(symcommHostAllgather(mp::world(), &mine, all.data(), sizeof mine));
  for (int64_t s : all) {
    if (s >= 0 && size >= 0) {
      EXPECT_EQ(s, size) << "members report other workspace sizes";
    }
    size = std::max(size, s);
  }
  void* ws = nullptr;
  if (size > 0) {
    EXPECT_OK(symcommMalloc(mp::world(), static_cast<size_t>(size), &ws));
    if (ws) mp::fill(ws, static_cast<size_t>(size), mp::rank(), 90);
  }
  if (bytes) *bytes = static_cast<size_t>(std::max<int64_t>(size, 0));
  return ws;
}

struct Gemm {
  Type ab, c;
  int bt, gather;
  int64_t n, k;  // k: all-gather + GEMM only (K is the sum of cols for the reduce-scatter)
  std::vector<int64_t> rows, cols;  // per team rank
  bool sym_a;                       // A_r in symmetric memory rather than plain
};

symcommFusedConfig_t gemm_config(symcommFusedOp_t op, const Gemm& g) {
  symcommFusedConfig_t c;
  symcommFusedConfigInit(&c);
  c.op = op;
  c.n = g.n;
  c.k = g.k;
  std::copy(g.rows.begin(), g.rows.end(), c.rows);
  if (op == symcommFusedGemmReduceScatter) std::copy(g.cols.begin(), g.cols.end(), c.cols);
  c.a_type = c.b_type = g.ab;
  c.c_type = g.c;
  c.b_transposed = g.bt;
  c.gather_a = g.gather;
  // SYMCOMM_TEST_FUSED_IMPL names the implementation every GEMM case runs (default: the
  // plan's choice), so that each one is checked against the reference.
  if (const char* impl = std::getenv("SYMCOMM_TEST_FUSED_IMPL"))
    std::snprintf(c.implementation, sizeof c.implementation, "%s", impl);
  return c;
}

std::string list(const std::vector<int64_t>& v) {
  std::string s;
  for (int64_t x : v) s += (s.empty() ? "" : ",") + std::to_string(x);
  return s;
}

// The data of one GEMM case on member `me`: C = A x B of a full A [M, K] (values from
// seed_a) and B [K, N] (from seed_b). All-gather + GEMM gives member r A's rows of block r
// and wants all of C; GEMM + reduce-scatter gives it A's columns and B's rows of block r (so
// that the sum over members of A_s x B_s is A x B) and wants C's rows of block r.
struct GemmData {
  int64_t m = 0, n = 0, k = 0;
  Vec a, a_mine, b_mine, want;  // a: the full A (the gathered A of an all-gather)
};

GemmData gemm_data(symcommFusedOp_t op, const Gemm& g, int me, uint64_t seed_a,
                   uint64_t seed_b) {
  const bool ag = op == symcommFusedAllGatherGemm;
  const int members = static_cast<int>(g.rows.size());
  std::vector<int64_t> roff(members + 1, 0), coff(members + 1, 0);
  for (int s = 0; s < members; ++s) {
    roff[s + 1] = roff[s] + g.rows[s];
    coff[s + 1] = coff[s] + (ag ? 0 : g.cols[s]);
  }
  GemmData d;
  d.m = roff[members], d.n = g.n, d.k = ag ? g.k : coff[members];
  const int64_t M = d.m, N = d.n, K = d.k;
  d.a.resize(static_cast<size_t>(M * K));
  Vec B(static_cast<size_t>(K * N)), C(static_cast<size_t>(M * N), 0.0);
  for (size_t i = 0; i < d.a.size(); ++i) d.a[i] = val(seed_a, 1, 0, i);
  for (size_t i = 0; i < B.size(); ++i) B[i] = val(seed_b, 2, 0, i);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t k = 0; k < K; ++k)
      for (int64_t j = 0; j < N; ++j) C[i * N + j] += d.a[i * K + k] * B[k * N + j];
  const int64_t kb = ag ? K : g.cols[me];  // rows of this member's B
  d.a_mine = ag ? block(d.a, K, roff[me], g.rows[me], 0, K) : block(d.a, K, 0, M, coff[me], kb);
  d.b_mine = block(B, N, ag ? 0 : coff[me], kb, 0, N, g.bt);
  d.want = ag ? C : block(C, N, roff[me], g.rows[me], 0, N);
  return d;
}

}  // namespace
