// What the binding's files share: the error that becomes symcomm.Error, the communicator
// object, and the translation of Python arguments (arrays through DLPack, dtypes, streams,
// reduction ops) into the C API's.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <cstddef>
#include <stdexcept>
#include <string>

#include "symcomm/coll.h"
#include "symcomm/symcomm.h"

namespace nb = nanobind;

namespace symcomm_py {

// Runs a C call without the GIL (it may wait for other ranks) and checks its result. Its
// arguments must not touch Python objects: translate them (stream_of, redop_of) first.
#define SYMCOMM_PY_CALL(call)        \
  do {                               \
    nb::gil_scoped_release release_; \
    check(call);                     \
  } while (0)

// A failed call: becomes symcomm.Error (code, name, message) in Python.
struct Error : std::runtime_error {
  Error(symcommResult_t code, const std::string& message)
      : std::runtime_error(message), code(code) {}
  symcommResult_t code;
};
// Throws the library's own error (its code and symcommGetLastError()) when `r` is a failure.
void check(symcommResult_t r);
[[noreturn]] void invalid(const std::string& message);  // symcommInvalidArgument

// A communicator. Finalize makes it unusable (every call then fails with
// symcommInvalidUsage) rather than leaving a dangling handle.
struct Comm {
  symcommComm_t handle = nullptr;
  symcommComm_t get() const;
  int team_size(symcommTeam_t team) const;
  int team_rank(symcommTeam_t team) const;
};

// Any array that speaks DLPack (numpy, torch, cupy, jax), taken as it is: no copy is made
// (a call on a copy would leave an output as it was), so at() checks its layout.
using Array = nb::ndarray<>;
// The array's memory; symcommInvalidArgument where it is not C-contiguous.
void* at(const Array& a);

// The symcomm type of an array's dtype; symcommInvalidArgument for one symcomm lacks.
symcommDataType_t type_of(const Array& a);
// The symcomm type named by a dtype: a string ("float32", "bfloat16", "float8_e4m3fn"), a
// numpy dtype or scalar type, a torch dtype (torch.float32).
symcommDataType_t type_named(nb::handle dtype);
nb::dlpack::dtype dlpack_of(symcommDataType_t t);
size_t size_of(symcommDataType_t t);
// The same type on both arrays, or symcommInvalidArgument naming `what`.
symcommDataType_t same_type(const Array& a, const Array& b, const char* what);

// A stream: None or 0 (the default stream; nothing in the host space), an int (a
// cudaStream_t's address), or an object with a `cuda_stream` attribute (torch.cuda.Stream).
symcommStream_t stream_of(nb::handle stream);
// A reduction: "sum", "min", "max", "prod", "avg", or an int (an op of premul_sum).
symcommRedOp_t redop_of(nb::handle op);
// An algorithm name, or nullptr (None: the automatic choice).
const char* algorithm_of(const std::string* name);

// The Comm class and its methods, by area.
nb::class_<Comm> bind_comm(nb::module_& m);
void bind_coll(nb::module_& m, nb::class_<Comm>& c);
void bind_rma(nb::module_& m, nb::class_<Comm>& c);
void bind_decomp(nb::module_& m, nb::class_<Comm>& c);
void bind_fused(nb::module_& m, nb::class_<Comm>& c);

}  // namespace symcomm_py
