// Communicators (init from the environment or from a unique id, queries, split, abort, the
// asynchronous error, finalize) and the symmetric heap as arrays.
#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <vector>

#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bind.h"

namespace symcomm_py {

namespace {

void cuda_check(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw Error(symcommCudaError, std::string(what) + " failed: " + cudaGetErrorString(e));
}

symcommConfig_t config_of(const std::optional<std::string>& space, int device) {
  symcommConfig_t config;
  check(symcommConfigInit(&config));
  if (space) {
    if (*space == "cuda") config.space = symcommSpaceCuda;
    else if (*space == "host") config.space = symcommSpaceHost;
    else if (*space != "auto") invalid("space '" + *space + "' is not 'cuda', 'host' or 'auto'");
  }
  config.device = device;
  return config;
}

Comm* from_env(const std::optional<std::string>& space, int device) {
  const symcommConfig_t config = config_of(space, device);
  symcommComm_t c = nullptr;
  {
    nb::gil_scoped_release release;  // collective: waits for the other ranks
    check(symcommInitFromEnv(&c, &config));
  }
  return new Comm{c};
}

Comm* from_id(int nranks, int rank, const std::string& id, const std::optional<std::string>& space,
              int device) {
  symcommUniqueId uid;
  check(symcommUniqueIdFromString(id.c_str(), &uid));
  const symcommConfig_t config = config_of(space, device);
  symcommComm_t c = nullptr;
  {
    nb::gil_scoped_release release;
    check(symcommInit(&c, nranks, rank, &uid, &config));
  }
  return new Comm{c};
}

std::string unique_id() {
  symcommUniqueId uid;
  check(symcommGetUniqueId(&uid));
  char text[SYMCOMM_UNIQUE_ID_STRING_BYTES];
  check(symcommUniqueIdToString(&uid, text, sizeof text));
  return text;
}

// A heap array of `shape` and `type` at `p`, as `framework` makes it; it keeps `owner` (the
// Comm) alive.
nb::object heap_array(void* p, const std::vector<size_t>& shape, symcommDataType_t type,
                      int device_type, int device_id, nb::handle owner,
                      const std::string& framework) {
  const nb::dlpack::dtype dt = dlpack_of(type);
  auto make = [&](auto tag) {
    using A = nb::ndarray<decltype(tag)>;
    return nb::cast(A(p, shape.size(), shape.data(), owner, nullptr, dt, device_type, device_id));
  };
  if (framework == "numpy") return make(nb::numpy{});
  if (framework == "torch") return make(nb::pytorch{});
  if (framework == "dlpack") return make(nb::array_api{});
  invalid("framework '" + framework + "' is not 'numpy', 'torch' or 'dlpack'");
}

// A registration (symcommRegister) and the communicator it belongs to.
struct Registration {
  symcommRegistration_t handle = nullptr;
  nb::object comm;
};

}  // namespace

nb::class_<Comm> bind_comm(nb::module_& m) {
  nb::class_<Registration>(m, "Registration", "An array registered with Comm.register.")
      .def("deregister",
           [](Registration& r) {
             if (!r.handle) return;
             symcommRegistration_t h = r.handle;
             r.handle = nullptr;
             const Comm& c = nb::cast<const Comm&>(r.comm);
             nb::gil_scoped_release release;  // collective
             check(symcommDeregister(c.get(), h));
           },
           "Collective: ends the registration (no collective using the array may be in "
           "flight); a second call does nothing.");
  m.def("unique_id", &unique_id,
        "A new unique id (text) for Comm(nranks, rank, unique_id): starts the bootstrap root "
        "in this process, which serves one init of any number of ranks.");
  return nb::class_<Comm>(m, "Comm",
                   "A communicator. Collective calls must be made by every rank (of the team) "
                   "in the same order.")
      .def_static("from_env", &from_env, nb::arg("space") = nb::none(), nb::arg("device") = -1,
                  "Joins the communicator of the launcher's environment (symrun, torchrun, "
                  "mpirun, srun). space: 'cuda', 'host' or None (SYMCOMM_MEMORY_SPACE, else "
                  "cuda where a GPU is); device: -1 for SYMCOMM_DEVICE or the local rank.",
                  nb::rv_policy::take_ownership)
      .def(nb::new_(&from_id), nb::arg("nranks"), nb::arg("rank"), nb::arg("unique_id"),
           nb::arg("space") = nb::none(), nb::arg("device") = -1,
           "Joins the communicator of `unique_id` (symcomm.unique_id() of one process) as "
           "`rank` of `nranks`.")
      .def_prop_ro("rank", [](const Comm& c) { int r; check(symcommCommRank(c.get(), &r)); return r; })
      .def_prop_ro("size", [](const Comm& c) { int n; check(symcommCommSize(c.get(), &n)); return n; })
      .def_prop_ro("local_rank",
                   [](const Comm& c) { int r; check(symcommCommLocalRank(c.get(), &r)); return r; })
      .def_prop_ro("local_size",
                   [](const Comm& c) { int n; check(symcommCommLocalSize(c.get(), &n)); return n; })
      .def_prop_ro("node",
                   [](const Comm& c) {
                     int node, nnodes;
                     check(symcommCommNode(c.get(), &node, &nnodes));
                     return std::make_pair(node, nnodes);
                   },
                   "(this rank's node, the number of nodes)")
      .def_prop_ro("space",
                   [](const Comm& c) {
                     symcommMemorySpace_t s;
                     check(symcommCommMemorySpace(c.get(), &s));
                     return s == symcommSpaceCuda ? "cuda" : "host";
                   })
      .def_prop_ro("device",
                   [](const Comm& c) { int d; check(symcommCommDevice(c.get(), &d)); return d; },
                   "This rank's CUDA device, or -1 in the host space")
      .def_prop_ro("finalized", [](const Comm& c) { return c.handle == nullptr; })
      .def("__repr__",
           [](const Comm& c) {
             if (!c.handle) return std::string("<symcomm.Comm (finalized)>");
             int r = 0, n = 0;
             symcommMemorySpace_t s = symcommSpaceHost;
             check(symcommCommRank(c.handle, &r));
             check(symcommCommSize(c.handle, &n));
             check(symcommCommMemorySpace(c.handle, &s));
             return "<symcomm.Comm rank " + std::to_string(r) + " of " + std::to_string(n) +
                    (s == symcommSpaceCuda ? ", cuda space>" : ", host space>");
           })
      .def("__enter__", [](nb::handle self) { return nb::borrow(self); })
      .def("__exit__",
           [](Comm& c, nb::handle, nb::handle, nb::handle) {
             if (!c.handle) return;
             symcommComm_t h = c.handle;
             c.handle = nullptr;
             nb::gil_scoped_release release;
             check(symcommFinalize(h));  // collective, as finalize()
           },
           nb::arg("type").none(), nb::arg("value").none(), nb::arg("traceback").none(),
           "`with symcomm.init() as comm:` finalizes it at the block's end (collective).")
      .def("team_size", &Comm::team_size, nb::arg("team") = 0)
      .def("team_rank", &Comm::team_rank, nb::arg("team") = 0)
      .def("peer_accessible",
           [](const Comm& c, int pe) {
             int a = 0;
             check(symcommPeerAccessible(c.get(), pe, &a));
             return a != 0;
           },
           nb::arg("pe"))
      .def("peer_transport",
           [](const Comm& c, int pe) {
             const char* name = nullptr;
             check(symcommPeerTransport(c.get(), pe, &name));
             return std::string(name);
           },
           nb::arg("pe"))
      .def("split",
           [](const Comm& c, int color, int key) -> Comm* {
             symcommComm_t made = nullptr;
             {
               nb::gil_scoped_release release;
               check(symcommCommSplit(c.get(), color, key, &made));
             }
             return made ? new Comm{made} : nullptr;
           },
           nb::arg("color"), nb::arg("key") = 0, nb::rv_policy::take_ownership,
           "Collective: a new communicator of the ranks of each color (>= 0), ordered by key "
           "then rank; None for color -1.")
      .def("host_barrier",
           [](const Comm& c) {
             nb::gil_scoped_release release;
             check(symcommHostBarrier(c.get()));
           })
      .def("abort",
           [](const Comm& c) { check(symcommCommAbort(c.get())); },
           "Ends every wait of the communicator on this rank and tells the others, without "
           "waiting for them; any thread may call it.")
      .def("async_error",
           [](const Comm& c) -> std::optional<std::pair<int, std::string>> {
             symcommResult_t r = symcommSuccess;
             check(symcommCommGetAsyncError(c.get(), &r));
             if (r == symcommSuccess) return std::nullopt;
             return std::make_pair(static_cast<int>(r), std::string(symcommGetLastError()));
           },
           "None, or (code, message) of the communicator's failure; non-blocking, any thread.")
      .def("synchronize",
           [](const Comm& c, nb::handle s) {
             int device = -1;
             check(symcommCommDevice(c.get(), &device));
             if (device < 0) return;  // the host space: calls complete on their thread
             const cudaStream_t st = reinterpret_cast<cudaStream_t>(stream_of(s));
             nb::gil_scoped_release release;
             cuda_check(cudaSetDevice(device), "cudaSetDevice");
             cuda_check(cudaStreamSynchronize(st), "cudaStreamSynchronize");
           },
           nb::arg("stream") = nb::none(),
           "Waits on the host for the stream's work on this rank's GPU (nothing in the host "
           "space): for programs without a GPU framework of their own.")
      .def("finalize",
           [](Comm& c) {
             if (!c.handle) return;
             symcommComm_t h = c.handle;
             c.handle = nullptr;  // unusable from here, whatever the result
             nb::gil_scoped_release release;
             check(symcommFinalize(h));
           },
           "Collective: leaves the communicator and frees its heap (arrays on it must not "
           "be used afterwards). A second call does nothing.")
      .def("empty",
           [](nb::handle self, nb::handle shape_arg, nb::handle dtype,
              std::optional<std::string> framework) {
             Comm& c = nb::cast<Comm&>(self);
             std::vector<size_t> shape;  // an int or a sequence of ints
             if (nb::isinstance<nb::int_>(shape_arg)) shape.push_back(nb::cast<size_t>(shape_arg));
             else if (!nb::try_cast(shape_arg, shape)) invalid("a shape is an int or a sequence of ints >= 0");
             const symcommDataType_t type = type_named(dtype);
             size_t n = 1;
             for (size_t d : shape) {
               if (d != 0 && n > SIZE_MAX / d) invalid("the shape's size overflows");
               n *= d;
             }
             if (n == 0) invalid("a symmetric array holds at least one element");
             if (n > SIZE_MAX / size_of(type)) invalid("the shape's size in bytes overflows");
             void* p = nullptr;
             {
               nb::gil_scoped_release release;  // collective
               check(symcommMalloc(c.get(), n * size_of(type), &p));
             }
             int device = -1;
             check(symcommCommDevice(c.get(), &device));
             const bool cuda = device >= 0;
             const std::string f = framework ? *framework : (cuda ? "dlpack" : "numpy");
             return heap_array(p, shape, type, cuda ? nb::device::cuda::value
                                                    : nb::device::cpu::value,
                               cuda ? device : 0, self, f);
           },
           nb::arg("shape"), nb::arg("dtype") = "float32", nb::arg("framework") = nb::none(),
           "Collective: an array on the symmetric heap (every rank the same shape and dtype), "
           "uninitialised. framework: 'numpy' (the host space's default), 'torch', or "
           "'dlpack' (the cuda space's default: any framework's from_dlpack takes it). It "
           "keeps the communicator alive; its memory lives until free() or finalize().")
      .def("free",
           [](const Comm& c, const Array& a) {
             nb::gil_scoped_release release;  // collective
             check(symcommFree(c.get(), at(a)));
           },
           nb::arg("array"),
           "Collective: frees an array of empty() (every rank its own); the array must not be "
           "used afterwards.")
      .def("register",
           [](nb::handle self, const Array& a) {
             const Comm& c = nb::cast<const Comm&>(self);
             symcommRegistration_t r = nullptr;
             {
               nb::gil_scoped_release release;  // collective
               check(symcommRegister(c.get(), at(a), a.nbytes(), &r));
             }
             return new Registration{r, nb::borrow(self)};
           },
           nb::arg("array"), nb::rv_policy::take_ownership,
           "Collective: makes an array of the application's own (cudaMalloc memory: a torch "
           "or cupy CUDA tensor) reachable by peers, so that collectives use it in place "
           "(every rank its own array, the same size). The cuda space only. Returns a "
           "Registration; its deregister() is collective too.")
      .def("peer",
           [](nb::handle self, const Array& a, int pe, std::optional<std::string> framework) {
             const Comm& c = nb::cast<const Comm&>(self);
             void* p = symcommPtr(c.get(), at(a), pe);
             if (!p)
               throw Error(symcommInvalidArgument,
                           "rank " + std::to_string(pe) + " cannot be reached by load/store "
                           "from this rank, or the array is not on the symmetric heap");
             std::vector<size_t> shape(a.ndim());
             for (size_t i = 0; i < a.ndim(); ++i) shape[i] = a.shape(i);
             const bool cuda = a.device_type() == nb::device::cuda::value;
             const std::string f = framework ? *framework : (cuda ? "dlpack" : "numpy");
             return heap_array(p, shape, type_of(a), a.device_type(), a.device_id(), self, f);
           },
           nb::arg("array"), nb::arg("pe"), nb::arg("framework") = nb::none(),
           "The array of rank `pe` at the same heap offset, as this rank loads and stores it "
           "(ranks symcommPeerAccessible reaches).");
}

}  // namespace symcomm_py
