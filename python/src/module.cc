// The extension module symcomm._symcomm: symcomm.Error, the argument translations of bind.h,
// and the bindings of comm.cc, coll.cc and rma.cc.
#include <cstdint>
#include <string>

#include <nanobind/stl/string.h>

#include "bind.h"

namespace symcomm_py {

namespace {

PyObject* g_error = nullptr;  // symcomm.Error, alive as long as the module

struct TypeName {
  const char* name;
  symcommDataType_t type;
  nb::dlpack::dtype dl;
};
using Code = nb::dlpack::dtype_code;
constexpr uint8_t c(Code code) { return static_cast<uint8_t>(code); }
const TypeName kTypes[] = {
    {"int8", symcommInt8, {c(Code::Int), 8, 1}},
    {"uint8", symcommUint8, {c(Code::UInt), 8, 1}},
    {"int32", symcommInt32, {c(Code::Int), 32, 1}},
    {"uint32", symcommUint32, {c(Code::UInt), 32, 1}},
    {"int64", symcommInt64, {c(Code::Int), 64, 1}},
    {"uint64", symcommUint64, {c(Code::UInt), 64, 1}},
    {"float16", symcommFloat16, {c(Code::Float), 16, 1}},
    {"bfloat16", symcommBfloat16, {c(Code::Bfloat), 16, 1}},
    {"float32", symcommFloat32, {c(Code::Float), 32, 1}},
    {"float64", symcommFloat64, {c(Code::Float), 64, 1}},
    {"float8_e4m3fn", symcommFloat8E4M3, {c(Code::Float8_E4M3FN), 8, 1}},
    {"float8_e5m2", symcommFloat8E5M2, {c(Code::Float8_E5M2), 8, 1}},
};

std::string dtype_text(nb::dlpack::dtype d) {
  return "DLPack type code " + std::to_string(d.code) + ", " + std::to_string(d.bits) +
         " bits, " + std::to_string(d.lanes) + " lanes";
}

}  // namespace

void check(symcommResult_t r) {
  if (r != symcommSuccess) throw Error(r, symcommGetLastError());
}

void invalid(const std::string& message) { throw Error(symcommInvalidArgument, message); }

symcommComm_t Comm::get() const {
  if (!handle) throw Error(symcommInvalidUsage, "the communicator was finalized");
  return handle;
}

int Comm::team_size(symcommTeam_t team) const {
  int n = 0;
  check(symcommTeamSize(get(), team, &n));
  return n;
}

int Comm::team_rank(symcommTeam_t team) const {
  int r = 0;
  check(symcommTeamRank(get(), team, &r));
  return r;
}

void* at(const Array& a) {
  if (a.size() == 0) return a.data();
  int64_t expect = 1;
  for (size_t i = a.ndim(); i-- > 0;) {
    if (a.shape(i) != 1 && a.stride(i) != expect)
      invalid("an array is not C-contiguous (dimension " + std::to_string(i) + " has stride " +
              std::to_string(a.stride(i)) + ", not " + std::to_string(expect) +
              "): pass a contiguous one (numpy.ascontiguousarray, tensor.contiguous())");
    expect *= static_cast<int64_t>(a.shape(i));
  }
  return a.data();
}

symcommDataType_t type_of(const Array& a) {
  for (const TypeName& t : kTypes)
    if (t.dl == a.dtype()) return t.type;
  invalid("arrays of " + dtype_text(a.dtype()) + " have no symcomm type (int8, uint8, int32, " +
          "uint32, int64, uint64, float16, bfloat16, float32, float64, float8_e4m3fn, " +
          "float8_e5m2)");
}

symcommDataType_t type_named(nb::handle dtype) {
  std::string name;
  if (nb::isinstance<nb::str>(dtype)) {
    name = nb::cast<std::string>(dtype);
  } else if (nb::hasattr(dtype, "__name__") && PyType_Check(dtype.ptr())) {
    name = nb::cast<std::string>(dtype.attr("__name__"));  // numpy.float32
  } else {
    name = nb::cast<std::string>(nb::str(dtype));  // numpy dtype('float32'), torch.float32
  }
  if (name.rfind("torch.", 0) == 0) name = name.substr(6);
  for (const TypeName& t : kTypes)
    if (name == t.name) return t.type;
  invalid("dtype '" + name + "' is not a symcomm type (int8, uint8, int32, uint32, int64, " +
          "uint64, float16, bfloat16, float32, float64, float8_e4m3fn, float8_e5m2)");
}

nb::dlpack::dtype dlpack_of(symcommDataType_t type) {
  for (const TypeName& t : kTypes)
    if (t.type == type) return t.dl;
  invalid("type " + std::to_string(static_cast<int>(type)) + " is not a symcomm type");
}

size_t size_of(symcommDataType_t type) { return (dlpack_of(type).bits + 7u) / 8u; }

symcommDataType_t same_type(const Array& a, const Array& b, const char* what) {
  const symcommDataType_t t = type_of(a);
  if (type_of(b) != t)
    invalid(std::string(what) + ": the arrays' dtypes differ (" + dtype_text(a.dtype()) +
            "; " + dtype_text(b.dtype()) + ")");
  return t;
}

symcommStream_t stream_of(nb::handle stream) {
  if (stream.is_none()) return nullptr;
  nb::handle s = stream;
  nb::object attr;
  if (nb::hasattr(stream, "cuda_stream")) {
    attr = stream.attr("cuda_stream");
    s = attr;
  }
  if (!nb::isinstance<nb::int_>(s))
    invalid("a stream is None, an int (a cudaStream_t) or has a cuda_stream attribute");
  return reinterpret_cast<symcommStream_t>(nb::cast<uintptr_t>(s));
}

symcommRedOp_t redop_of(nb::handle op) {
  if (nb::isinstance<nb::int_>(op)) return static_cast<symcommRedOp_t>(nb::cast<int>(op));
  if (!nb::isinstance<nb::str>(op))
    invalid("a reduction is 'sum', 'min', 'max', 'prod', 'avg' or an op of premul_sum");
  const std::string name = nb::cast<std::string>(op);
  static const std::pair<const char*, symcommRedOp_t> kOps[] = {
      {"sum", symcommSum}, {"min", symcommMin}, {"max", symcommMax},
      {"prod", symcommProd}, {"avg", symcommAvg}};
  for (const auto& [n, v] : kOps)
    if (name == n) return v;
  invalid("reduction '" + name + "' is not 'sum', 'min', 'max', 'prod' or 'avg'");
}

const char* algorithm_of(const std::string* name) { return name ? name->c_str() : nullptr; }

}  // namespace symcomm_py

NB_MODULE(_symcomm, m) {
  using namespace symcomm_py;
  m.doc() = "symcomm: GPU-to-GPU communication through symmetric memory";
  // Communicators held by torch's process groups (symcomm.torch_backend) or by the torch
  // operators' table live until the interpreter ends, after the module's teardown: that is
  // their lifetime, not a leak to report at every exit.
  nb::set_leak_warnings(false);
  g_error = PyErr_NewExceptionWithDoc(
      "symcomm.Error",
      "A failed symcomm call: `code` (the symcommResult_t), `name` (its name) and the "
      "library's message.",
      PyExc_RuntimeError, nullptr);
  m.attr("Error") = nb::handle(g_error);
  nb::register_exception_translator(
      [](const std::exception_ptr& p, void* payload) {
        try {
          std::rethrow_exception(p);
        } catch (const Error& e) {
          nb::handle type(static_cast<PyObject*>(payload));
          nb::object error = type(nb::str(e.what()));
          error.attr("code") = static_cast<int>(e.code);
          const std::string text = symcommGetErrorString(e.code);  // "name: what it means"
          error.attr("name") = text.substr(0, text.find(':'));
          PyErr_SetObject(type.ptr(), error.ptr());
        }
      },
      g_error);
  int version = 0;
  check(symcommGetVersion(&version));
  m.attr("version") = version;  // major * 10000 + minor * 100 + patch
  nb::class_<Comm> comm = bind_comm(m);
  bind_coll(m, comm);
  bind_rma(m, comm);
  bind_decomp(m, comm);
  bind_fused(m, comm);
}
