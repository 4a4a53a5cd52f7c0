#include <cstring>

#include "base/error.h"
#include "fused/fused.h"

namespace symcomm {

namespace {

bool gemm_input(symcommDataType_t t) { return t == symcommFloat16 || t == symcommBfloat16; }
bool gemm_output(symcommDataType_t t) { return gemm_input(t) || t == symcommFloat32; }

// Checks the first `members` entries of `v` (named `field`: each >= 0, their sum >= 1, the
// rest 0) and gives them with their prefix sums and total.
int64_t parts(const int64_t* v, int members, const char* field, std::vector<int64_t>* out,
              std::vector<int64_t>* start) {
  int64_t sum = 0;
  for (int i = 0; i < SYMCOMM_FUSED_MAX_MEMBERS; ++i) {
    if (i >= members) {
      SYMCOMM_REQUIRE(v[i] == 0, symcommInvalidArgument,
                      "%s[%d] is %lld, but the team has %d members (entries past them must be "
                      "0)", field, i, static_cast<long long>(v[i]), members);
      continue;
    }
    SYMCOMM_REQUIRE(v[i] >= 0, symcommInvalidArgument, "%s[%d] is %lld, must be >= 0", field, i,
                    static_cast<long long>(v[i]));
    start->push_back(sum);
    out->push_back(v[i]);
    sum += v[i];
  }
  SYMCOMM_REQUIRE(sum >= 1, symcommInvalidArgument,
                  "%s[] sums to 0 over the team's %d members: the matrix is empty", field, members);
  return sum;
}

}  // namespace

size_t fused_element_bytes(symcommDataType_t type) {
  switch (type) {
    case symcommFloat16:
    case symcommBfloat16: return 2;
    case symcommFloat32: return 4;
    default: return 0;
  }
}

FusedShape check_fused_config(const symcommFusedConfig_t* config, int members) {
  SYMCOMM_REQUIRE(config != nullptr, symcommInvalidArgument, "config is NULL");
  SYMCOMM_REQUIRE(config->magic == SYMCOMM_FUSED_CONFIG_MAGIC &&
                      config->struct_size == sizeof(symcommFusedConfig_t),
                  symcommInvalidArgument,
                  "config was not initialised by symcommFusedConfigInit (magic or struct_size "
                  "differ: this build's struct is %zu bytes)", sizeof(symcommFusedConfig_t));
  SYMCOMM_REQUIRE(members >= 1 && members <= SYMCOMM_FUSED_MAX_MEMBERS, symcommInvalidArgument,
                  "the team has %d members; a fused plan takes at most %d "
                  "(SYMCOMM_FUSED_MAX_MEMBERS)", members, SYMCOMM_FUSED_MAX_MEMBERS);
  FusedShape s;
  s.op = config->op;
  SYMCOMM_REQUIRE(s.op == symcommFusedAllGatherGemm || s.op == symcommFusedGemmReduceScatter ||
                      s.op == symcommFusedTransposeAccumulate,
                  symcommInvalidArgument, "op %d is not a symcommFusedOp_t",
                  static_cast<int>(s.op));
  const char* name = config->implementation;
  SYMCOMM_REQUIRE(memchr(name, '\0', sizeof config->implementation) != nullptr,
                  symcommInvalidArgument, "implementation is not NUL-terminated");
  s.implementation = name;
  s.a_type = config->a_type;
  s.b_type = config->b_type;
  s.c_type = config->c_type;
  s.n = config->n;
  if (s.op == symcommFusedTransposeAccumulate) {
    s.n = parts(config->cols, members, "cols", &s.cols, &s.col_start);
    SYMCOMM_REQUIRE(config->n == s.n, symcommInvalidArgument,
                    "n is %lld, but X is N x N with N the sum of cols[] (%lld)",
                    static_cast<long long>(config->n), static_cast<long long>(s.n));
    SYMCOMM_REQUIRE(s.a_type == symcommFloat32 || gemm_input(s.a_type), symcommInvalidArgument,
                    "a_type %d: the transpose takes float32, float16 or bfloat16",
                    static_cast<int>(s.a_type));
    SYMCOMM_REQUIRE(s.c_type == s.a_type, symcommInvalidArgument,
                    "c_type %d differs from a_type %d: the transpose accumulates in X's type",
                    static_cast<int>(s.c_type), static_cast<int>(s.a_type));
    return s;
  }
  SYMCOMM_REQUIRE(s.n >= 1, symcommInvalidArgument, "n is %lld, must be >= 1",
                  static_cast<long long>(s.n));
  SYMCOMM_REQUIRE(gemm_input(s.a_type), symcommInvalidArgument,
                  "a_type %d: GEMM inputs are float16 or bfloat16", static_cast<int>(s.a_type));
  SYMCOMM_REQUIRE(s.b_type == s.a_type, symcommInvalidArgument,
                  "b_type %d differs from a_type %d", static_cast<int>(s.b_type),
                  static_cast<int>(s.a_type));
  SYMCOMM_REQUIRE(gemm_output(s.c_type), symcommInvalidArgument,
                  "c_type %d: GEMM outputs are float16, bfloat16 or float32",
                  static_cast<int>(s.c_type));
  s.b_transposed = config->b_transposed != 0;
  s.m = parts(config->rows, members, "rows", &s.rows, &s.row_start);
  if (s.op == symcommFusedAllGatherGemm) {
    s.k = config->k;
    SYMCOMM_REQUIRE(s.k >= 1, symcommInvalidArgument, "k is %lld, must be >= 1",
                    static_cast<long long>(s.k));
    s.gather_a = config->gather_a != 0;
  } else {
    s.k = parts(config->cols, members, "cols", &s.cols, &s.col_start);
    SYMCOMM_REQUIRE(!config->gather_a, symcommInvalidArgument,
                    "gather_a is set: only all-gather + GEMM gathers A");
  }
  return s;
}

const FusedImplementation& choose_fused(const FusedShape& shape, const FusedContext& ctx) {
  const auto& all = Registry<FusedImplementation>::instance().all();
  if (!shape.implementation.empty()) {
    const FusedImplementation* named =
        Registry<FusedImplementation>::instance().find(shape.implementation);
    SYMCOMM_REQUIRE(named, symcommInvalidArgument,
                    "implementation '%s' names no fused implementation",
                    shape.implementation.c_str());
    const Verdict v = named->can_implement(shape, ctx);
    SYMCOMM_REQUIRE(v.ok(), symcommNotSupported, "fused implementation '%s' cannot run here: %s",
                    named->name(), v.reason().c_str());
    return *named;
  }
  // The first (by preference) that can implement the shape and suits it; else the first that
  // can implement it.
  std::string why;
  const FusedImplementation* able = nullptr;
  for (const FusedImplementation* f : all) {
    const Verdict v = f->can_implement(shape, ctx);
    if (v && f->suits(shape, ctx)) return *f;
    if (v && !able) able = f;
    if (!v) why += format("\n  %s: %s", f->name(), v.reason().c_str());
  }
  if (able) return *able;
  SYMCOMM_THROW(symcommNotSupported, "no fused implementation can run here:%s", why.c_str());
}

}  // namespace symcomm
