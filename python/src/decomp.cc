// The pencil decomposition (symcomm/decomp.h): a Decomp per configuration, its pencils'
// layouts, transposes and halo exchanges on arrays of float32, float64, complex64 and
// complex128.
#include <array>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>

#include <nanobind/stl/array.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>

#include "bind.h"
#include "symcomm/decomp.h"

namespace symcomm_py {

namespace {

using Triple = std::array<int64_t, 3>;
using OptTriple = std::optional<Triple>;

struct Decomp {
  symcommDecomp_t handle = nullptr;
  nb::object comm;  // keeps the communicator alive as long as the decomposition
  symcommDecomp_t get() const {
    if (!handle) throw Error(symcommInvalidUsage, "the decomposition was destroyed");
    return handle;
  }
};

symcommDecompType_t decomp_type(const Array& a) {
  const nb::dlpack::dtype d = a.dtype();
  using Code = nb::dlpack::dtype_code;
  if (d.lanes == 1 && d.code == static_cast<uint8_t>(Code::Float) && d.bits == 32) return symcommR32;
  if (d.lanes == 1 && d.code == static_cast<uint8_t>(Code::Float) && d.bits == 64) return symcommR64;
  if (d.lanes == 1 && d.code == static_cast<uint8_t>(Code::Complex) && d.bits == 64) return symcommC32;
  if (d.lanes == 1 && d.code == static_cast<uint8_t>(Code::Complex) && d.bits == 128) return symcommC64;
  invalid("decomposition arrays are float32, float64, complex64 or complex128");
}

symcommDecompType_t decomp_type_named(const std::string& name) {
  if (name == "float32") return symcommR32;
  if (name == "float64") return symcommR64;
  if (name == "complex64") return symcommC32;
  if (name == "complex128") return symcommC64;
  invalid("decomposition type '" + name + "' is not float32, float64, complex64 or complex128");
}

const int64_t* ptr(const OptTriple& t) { return t ? t->data() : nullptr; }

void copy_name(char (&dst)[32], const std::string& name, const char* what) {
  if (name.size() >= sizeof dst) invalid(std::string(what) + " '" + name + "' is too long");
  std::memcpy(dst, name.c_str(), name.size() + 1);
}

nb::dict pencil_dict(const symcommPencilInfo_t& p) {
  nb::dict d;
  d["axis"] = p.axis;
  d["order"] = std::make_tuple(p.order[0], p.order[1], p.order[2]);
  auto t = [](const int64_t* v) { return std::make_tuple(v[0], v[1], v[2]); };
  d["lo"] = t(p.lo);
  d["hi"] = t(p.hi);
  d["halo"] = t(p.halo);
  d["padding"] = t(p.padding);
  d["shape"] = t(p.shape);
  d["size"] = p.size;
  return d;
}

Decomp* create(nb::handle comm_obj, Triple gdims, std::array<int, 2> pdims,
               const std::string& backend, const std::string& halo_backend,
               std::array<int, 3> axis_contiguous, const std::string& rank_order) {
  const Comm& comm = nb::cast<const Comm&>(comm_obj);
  symcommDecompConfig_t config;
  check(symcommDecompConfigInit(&config));
  for (int i = 0; i < 3; ++i) config.gdims[i] = gdims[static_cast<size_t>(i)];
  config.pdims[0] = pdims[0];
  config.pdims[1] = pdims[1];
  for (int i = 0; i < 3; ++i) config.axis_contiguous[i] = axis_contiguous[static_cast<size_t>(i)];
  if (rank_order == "row") config.rank_order = symcommRowMajor;
  else if (rank_order == "column") config.rank_order = symcommColumnMajor;
  else invalid("rank_order '" + rank_order + "' is not 'row' or 'column'");
  copy_name(config.backend, backend, "backend");
  copy_name(config.halo_backend, halo_backend, "halo backend");
  symcommDecomp_t d = nullptr;
  {
    nb::gil_scoped_release release;  // collective; may autotune
    check(symcommDecompCreate(comm.get(), &config, &d));
  }
  return new Decomp{d, nb::borrow(comm_obj)};
}

}  // namespace

void bind_decomp(nb::module_& m, nb::class_<Comm>& c) {
  nb::class_<Decomp>(m, "Decomp",
                     "A pencil decomposition of a 3D grid over the communicator's ranks "
                     "(symcommDecompCreate): transposes X <-> Y <-> Z and halo exchanges.")
      .def_prop_ro("backend",
                   [](const Decomp& d) {
                     const char* n = nullptr;
                     check(symcommDecompGetBackend(d.get(), &n));
                     return std::string(n);
                   })
      .def_prop_ro("halo_backend",
                   [](const Decomp& d) {
                     const char* n = nullptr;
                     check(symcommDecompGetHaloBackend(d.get(), &n));
                     return std::string(n);
                   })
      .def_prop_ro("pdims",
                   [](const Decomp& d) {
                     symcommDecompConfig_t config;
                     check(symcommDecompConfigInit(&config));
                     check(symcommDecompGetConfig(d.get(), &config));
                     return std::make_tuple(config.pdims[0], config.pdims[1]);
                   },
                   "(pr, pc): the process grid, as given or as autotuning chose it")
      .def_prop_ro("grid_coords",
                   [](const Decomp& d) {
                     int row = 0, col = 0;
                     check(symcommDecompGridCoords(d.get(), &row, &col));
                     return std::make_tuple(row, col);
                   })
      .def("pencil",
           [](const Decomp& d, int axis, OptTriple halo, OptTriple padding) {
             symcommPencilInfo_t p;
             check(symcommDecompPencilInfo(d.get(), axis, ptr(halo), ptr(padding), &p));
             return pencil_dict(p);
           },
           nb::arg("axis"), nb::arg("halo") = nb::none(), nb::arg("padding") = nb::none(),
           "This rank's part of the pencil whose complete axis is `axis` (0 x, 1 y, 2 z): a "
           "dict of axis, order (memory order, fastest first), lo, hi, halo, padding (per "
           "global axis), shape (extents in memory order) and size (elements).")
      .def("workspace_size",
           [](const Decomp& d, const std::string& dtype) {
             size_t bytes = 0;
             check(symcommDecompWorkspaceSize(d.get(), decomp_type_named(dtype), &bytes));
             return bytes;
           },
           nb::arg("dtype"), "Bytes of symmetric workspace (Comm.empty) its transposes need.")
      .def("transpose",
           [](const Decomp& d, int from, int to, const Array& input, const Array& output,
              const Array& workspace, OptTriple in_halo, OptTriple in_padding,
              OptTriple out_halo, OptTriple out_padding, nb::handle s) {
             const symcommDecompType_t t = decomp_type(input);
             if (decomp_type(output) != t) invalid("transpose: input and output types differ");
             const symcommStream_t st = stream_of(s);  // with the GIL held
             SYMCOMM_PY_CALL(symcommDecompTranspose(
                 d.get(), from, to, at(input), at(output), at(workspace), t,
                 ptr(in_halo), ptr(in_padding), ptr(out_halo), ptr(out_padding), st));
           },
           nb::arg("from_axis"), nb::arg("to_axis"), nb::arg("input"), nb::arg("output"),
           nb::arg("workspace"), nb::arg("in_halo") = nb::none(),
           nb::arg("in_padding") = nb::none(), nb::arg("out_halo") = nb::none(),
           nb::arg("out_padding") = nb::none(), nb::arg("stream") = nb::none(),
           "This rank's from_axis pencil in input into its to_axis pencil in output "
           "(X->Y, Y->Z, Z->Y, Y->X), collective over the ranks that exchange.")
      .def("halo_workspace_size",
           [](const Decomp& d, int axis, int dim, const std::string& dtype, OptTriple halo,
              OptTriple padding) {
             size_t bytes = 0;
             check(symcommDecompHaloWorkspaceSize(d.get(), axis, dim, decomp_type_named(dtype),
                                                  ptr(halo), ptr(padding), &bytes));
             return bytes;
           },
           nb::arg("axis"), nb::arg("dim"), nb::arg("dtype"), nb::arg("halo") = nb::none(),
           nb::arg("padding") = nb::none())
      .def("halo",
           [](const Decomp& d, int axis, int dim, const Array& buffer, const Array& workspace,
              OptTriple halo, OptTriple padding, std::array<int, 3> periodic, nb::handle s) {
             const symcommStream_t st = stream_of(s);  // with the GIL held
             SYMCOMM_PY_CALL(symcommDecompHalo(d.get(), axis, dim, at(buffer),
                                               at(workspace), decomp_type(buffer),
                                               ptr(halo), ptr(padding), periodic.data(), st));
           },
           nb::arg("axis"), nb::arg("dim"), nb::arg("buffer"), nb::arg("workspace"),
           nb::arg("halo") = nb::none(), nb::arg("padding") = nb::none(),
           nb::arg("periodic") = std::array<int, 3>{1, 1, 1}, nb::arg("stream") = nb::none(),
           "Fills the halo of this rank's axis pencil in buffer along global axis dim from "
           "its neighbours (collective over the grid).")
      .def("destroy",
           [](Decomp& d) {
             if (!d.handle) return;
             symcommDecomp_t h = d.handle;
             d.handle = nullptr;
             check(symcommDecompDestroy(h));
           },
           "Frees it (no transpose or halo exchange of it may be in flight); a second call "
           "does nothing.");
  c.def("decomp", &create, nb::arg("gdims"), nb::arg("pdims") = std::array<int, 2>{0, 0},
        nb::arg("backend") = "", nb::arg("halo_backend") = "",
        nb::arg("axis_contiguous") = std::array<int, 3>{0, 0, 0}, nb::arg("rank_order") = "row",
        nb::rv_policy::take_ownership,
        "Collective: a pencil decomposition of gdims (x, y, z) points over a pr x pc grid "
        "(0 x 0: autotuned), backend by name ('' the first that runs, 'auto' autotuned).");
}

}  // namespace symcomm_py
