// Fused communication and computation (symcomm/fused.h): plans for all-gather + GEMM, GEMM +
// reduce-scatter and transpose + accumulate over a team, their checks and runs on arrays.
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bind.h"
#include "symcomm/fused.h"

namespace symcomm_py {

namespace {

struct FusedPlan {
  symcommFusedPlan_t handle = nullptr;
  nb::object comm;  // kept alive as long as the plan
  symcommFusedPlan_t get() const {
    if (!handle) throw Error(symcommInvalidUsage, "the fused plan was destroyed");
    return handle;
  }
};

symcommFusedOp_t op_named(const std::string& name) {
  if (name == "all_gather_gemm") return symcommFusedAllGatherGemm;
  if (name == "gemm_reduce_scatter") return symcommFusedGemmReduceScatter;
  if (name == "transpose_accumulate") return symcommFusedTransposeAccumulate;
  invalid("fused operation '" + name + "' is not 'all_gather_gemm', 'gemm_reduce_scatter' or "
          "'transpose_accumulate'");
}

void per_member(int64_t (&dst)[SYMCOMM_FUSED_MAX_MEMBERS], const std::vector<int64_t>& v,
                const char* what) {
  if (v.size() > SYMCOMM_FUSED_MAX_MEMBERS)
    invalid(std::string(what) + ": more than " + std::to_string(SYMCOMM_FUSED_MAX_MEMBERS) +
            " members");
  for (size_t i = 0; i < v.size(); ++i) dst[i] = v[i];
}

symcommFusedConfig_t config_of(const std::string& op, int64_t n, int64_t k,
                               const std::vector<int64_t>& rows, const std::vector<int64_t>& cols,
                               nb::handle a_type, nb::handle b_type, nb::handle c_type,
                               bool b_transposed, bool gather_a, const std::string& impl) {
  symcommFusedConfig_t config;
  check(symcommFusedConfigInit(&config));
  config.op = op_named(op);
  config.n = n;
  config.k = k;
  per_member(config.rows, rows, "rows");
  per_member(config.cols, cols, "cols");
  config.a_type = type_named(a_type);
  config.b_type = b_type.is_none() ? config.a_type : type_named(b_type);
  config.c_type = c_type.is_none() ? config.a_type : type_named(c_type);
  config.b_transposed = b_transposed;
  config.gather_a = gather_a;
  if (impl.size() >= sizeof config.implementation) invalid("implementation name too long");
  std::memcpy(config.implementation, impl.c_str(), impl.size() + 1);
  return config;
}

void* data_or_null(const std::optional<Array>& a) { return a ? at(*a) : nullptr; }

}  // namespace

void bind_fused(nb::module_& m, nb::class_<Comm>& c) {
  nb::class_<FusedPlan>(m, "FusedPlan",
                        "A fused operation over a team (symcommFusedPlanCreate): run() it on "
                        "arrays as many times as needed.")
      .def_prop_ro("implementation",
                   [](const FusedPlan& p) {
                     const char* name = nullptr;
                     check(symcommFusedPlanImplementation(p.get(), &name));
                     return std::string(name);
                   })
      .def_prop_ro("workspace_size",
                   [](const FusedPlan& p) {
                     size_t bytes = 0;
                     check(symcommFusedWorkspaceSize(p.get(), &bytes));
                     return bytes;
                   },
                   "Bytes of symmetric workspace run() needs (0: none)")
      .def("run",
           [](const FusedPlan& p, std::optional<Array> a, std::optional<Array> b,
              std::optional<Array> out, std::optional<Array> gathered,
              std::optional<Array> workspace, nb::handle s) {
             const symcommStream_t st = stream_of(s);  // with the GIL held
             SYMCOMM_PY_CALL(symcommFusedRun(p.get(), data_or_null(a), data_or_null(b),
                                             data_or_null(out), data_or_null(gathered),
                                             data_or_null(workspace), st));
           },
           nb::arg("a").none(), nb::arg("b").none(), nb::arg("c").none(),
           nb::arg("gathered") = nb::none(), nb::arg("workspace") = nb::none(),
           nb::arg("stream") = nb::none(),
           "Collective over the team: the plan's operation on row-major arrays (symcomm/"
           "fused.h): a (A_r or X_r), b (B or B_r; None for the transpose), c (C, C_r or "
           "out_r), gathered (all-gather + GEMM with gather_a), workspace.")
      .def("destroy",
           [](FusedPlan& p) {
             if (!p.handle) return;
             symcommFusedPlan_t h = p.handle;
             p.handle = nullptr;
             check(symcommFusedPlanDestroy(h));
           });
  c.def("fused_can_implement",
        [](const Comm& self, const std::string& op, int64_t n, int64_t k,
           std::vector<int64_t> rows, std::vector<int64_t> cols, nb::handle a_type,
           nb::handle b_type, nb::handle c_type, bool b_transposed, bool gather_a,
           const std::string& impl, symcommTeam_t team) {
          const symcommFusedConfig_t config = config_of(op, n, k, rows, cols, a_type, b_type,
                                                        c_type, b_transposed, gather_a, impl);
          char why[512] = "";
          const symcommResult_t r = symcommFusedCanImplement(self.get(), team, &config, why,
                                                             sizeof why);
          if (r != symcommSuccess && r != symcommNotSupported) check(r);
          return std::make_pair(r == symcommSuccess, std::string(why));
        },
        nb::arg("op"), nb::arg("n"), nb::arg("k") = 0, nb::arg("rows") = std::vector<int64_t>{},
        nb::arg("cols") = std::vector<int64_t>{}, nb::arg("a_type") = "bfloat16",
        nb::arg("b_type") = nb::none(), nb::arg("c_type") = nb::none(),
        nb::arg("b_transposed") = false, nb::arg("gather_a") = false,
        nb::arg("implementation") = "", nb::arg("team") = 0,
        "(whether a plan of this configuration can run here, why not); local.");
  c.def("fused_plan",
        [](nb::handle self_obj, const std::string& op, int64_t n, int64_t k,
           std::vector<int64_t> rows, std::vector<int64_t> cols, nb::handle a_type,
           nb::handle b_type, nb::handle c_type, bool b_transposed, bool gather_a,
           const std::string& impl, symcommTeam_t team) {
          const Comm& self = nb::cast<const Comm&>(self_obj);
          const symcommFusedConfig_t config = config_of(op, n, k, rows, cols, a_type, b_type,
                                                        c_type, b_transposed, gather_a, impl);
          symcommFusedPlan_t plan = nullptr;
          {
            nb::gil_scoped_release release;  // collective
            check(symcommFusedPlanCreate(self.get(), team, &config, &plan));
          }
          return new FusedPlan{plan, nb::borrow(self_obj)};
        },
        nb::arg("op"), nb::arg("n"), nb::arg("k") = 0, nb::arg("rows") = std::vector<int64_t>{},
        nb::arg("cols") = std::vector<int64_t>{}, nb::arg("a_type") = "bfloat16",
        nb::arg("b_type") = nb::none(), nb::arg("c_type") = nb::none(),
        nb::arg("b_transposed") = false, nb::arg("gather_a") = false,
        nb::arg("implementation") = "", nb::arg("team") = 0, nb::rv_policy::take_ownership,
        "Collective over the team: a plan of op ('all_gather_gemm', 'gemm_reduce_scatter', "
        "'transpose_accumulate'); rows and cols per team rank as symcomm/fused.h says.");
}

}  // namespace symcomm_py
