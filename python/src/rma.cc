// One-sided calls on a stream: put, get (blocking and _nbi), put-signal, signal wait, quiet,
// fetching atomics. Symmetric arrays are named by this rank's array (empty()); the peer's
// copy at the same heap offset is the one read or written.
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include "bind.h"

namespace symcomm_py {

namespace {

symcommEngine_t engine_of(const std::string& name) {
  if (name == "auto") return symcommEngineAuto;
  if (name == "ce") return symcommEngineCe;
  if (name == "sm") return symcommEngineSm;
  invalid("engine '" + name + "' is not 'auto', 'ce' or 'sm'");
}

symcommCmp_t cmp_of(const std::string& name) {
  static const std::pair<const char*, symcommCmp_t> kCmps[] = {
      {"eq", symcommCmpEq}, {"ne", symcommCmpNe}, {"ge", symcommCmpGe},
      {"gt", symcommCmpGt}, {"le", symcommCmpLe}, {"lt", symcommCmpLt}};
  for (const auto& [n, v] : kCmps)
    if (name == n) return v;
  invalid("comparison '" + name + "' is not 'eq', 'ne', 'ge', 'gt', 'le' or 'lt'");
}

// The signal word: a symmetric uint64 array of one element.
uint64_t* word_of(const Array& a, const char* what) {
  if (a.size() != 1 || a.dtype() != nb::dtype<uint64_t>())
    invalid(std::string(what) + ": the signal is a uint64 array of one element");
  return static_cast<uint64_t*>(at(a));
}

// Both arrays hold as many bytes; returns them.
size_t same_bytes(const Array& a, const Array& b, const char* what) {
  if (a.nbytes() != b.nbytes())
    invalid(std::string(what) + ": dst holds " + std::to_string(a.nbytes()) + " bytes, src " +
            std::to_string(b.nbytes()));
  return a.nbytes();
}

// put (Put) or get: dst and src of equal byte sizes; nbi chooses the _nbi call.
template <bool Put>
auto transfer() {
  return [](const Comm& self, const Array& dst, const Array& src, int pe, bool nbi,
            const std::string& e, nb::handle s) {
    const size_t bytes = same_bytes(dst, src, Put ? "put" : "get");
    const auto call = Put ? (nbi ? symcommPutNbiOnStream : symcommPutOnStream)
                          : (nbi ? symcommGetNbiOnStream : symcommGetOnStream);
    const symcommStream_t st = stream_of(s);  // with the GIL held
    SYMCOMM_PY_CALL(call(self.get(), at(dst), at(src), bytes, pe, engine_of(e), st));
  };
}

}  // namespace

void bind_rma(nb::module_&, nb::class_<Comm>& c) {
  const auto stream = nb::arg("stream") = nb::none();
  const auto engine = nb::arg("engine") = "auto";
  c.def("put", transfer<true>(), nb::arg("dst"), nb::arg("src"), nb::arg("pe"),
        nb::arg("nbi") = false, engine, stream,
        "src (any array) into rank pe's copy of the symmetric array dst, in stream order "
        "(nbi: complete at the next quiet).");
  // For bench/torch_dist.py --overhead: the binding's own cost is put()'s host time less this.
  c.def("_put_host_us",
        [](const Comm& self, const Array& dst, const Array& src, int pe, int n, nb::handle s) {
          const size_t bytes = same_bytes(dst, src, "put");
          if (n < 1) invalid("_put_host_us: n is at least 1");
          const symcommStream_t st = stream_of(s);
          void* const to = at(dst);
          const void* const from = at(src);
          nb::gil_scoped_release release;
          const auto t0 = std::chrono::steady_clock::now();
          for (int i = 0; i < n; ++i)
            check(symcommPutOnStream(self.get(), to, from, bytes, pe, symcommEngineAuto, st));
          const std::chrono::duration<double, std::micro> t =
              std::chrono::steady_clock::now() - t0;
          return t.count() / n;
        },
        nb::arg("dst"), nb::arg("src"), nb::arg("pe"), nb::arg("n"), stream,
        "Host microseconds per put of src into rank pe's dst through the C API alone, over n "
        "calls in a loop of C++ (what put() costs without Python and the binding).");
  c.def("get", transfer<false>(), nb::arg("dst"), nb::arg("src"), nb::arg("pe"),
        nb::arg("nbi") = false, engine, stream,
        "Rank pe's copy of the symmetric array src into dst (any array), in stream order.");
  c.def("put_signal",
        [](const Comm& self, const Array& dst, const Array& src, const Array& signal,
           uint64_t value, int pe, const std::string& op, const std::string& e, nb::handle s) {
          const size_t bytes = same_bytes(dst, src, "put_signal");
          if (op != "set" && op != "add") invalid("put_signal: op is 'set' or 'add'");
          const symcommStream_t st = stream_of(s);  // with the GIL held
          SYMCOMM_PY_CALL(symcommPutSignalOnStream(
              self.get(), at(dst), at(src), bytes, word_of(signal, "put_signal"), value,
              op == "set" ? symcommSignalSet : symcommSignalAdd, pe, engine_of(e),
              st));
        },
        nb::arg("dst"), nb::arg("src"), nb::arg("signal"), nb::arg("value"), nb::arg("pe"),
        nb::arg("op") = "set", engine, stream,
        "put, then rank pe's signal word set to (or added) value once the data is there.");
  c.def("signal_wait",
        [](const Comm& self, const Array& signal, const std::string& cmp, uint64_t value,
           nb::handle s) {
          const symcommStream_t st = stream_of(s);  // with the GIL held
          SYMCOMM_PY_CALL(symcommSignalWaitOnStream(self.get(), word_of(signal, "signal_wait"),
                                                    cmp_of(cmp), value, st));
        },
        nb::arg("signal"), nb::arg("cmp"), nb::arg("value"), stream,
        "Holds the stream until this rank's signal word compares to value (bounded by "
        "SYMCOMM_WAIT_TIMEOUT).");
  c.def("quiet",
        [](const Comm& self, nb::handle s) {
          const symcommStream_t st = stream_of(s);  // with the GIL held
          SYMCOMM_PY_CALL(symcommQuietOnStream(self.get(), st));
        },
        stream, "Every put, get and signal of this rank on the stream is complete.");
  c.def("fetch_add",
        [](const Comm& self, const Array& word, uint64_t value, int pe, const Array& result,
           nb::handle s) {
          const symcommStream_t st = stream_of(s);  // with the GIL held
          SYMCOMM_PY_CALL(symcommAtomicFetchAddOnStream(
              self.get(), word_of(word, "fetch_add"), value, pe, word_of(result, "fetch_add"),
              st));
        },
        nb::arg("word"), nb::arg("value"), nb::arg("pe"), nb::arg("result"), stream,
        "Adds value to rank pe's copy of the symmetric uint64 word; the old value goes to "
        "result (a uint64 array of one element), in stream order.");
  c.def("compare_swap",
        [](const Comm& self, const Array& word, uint64_t expected, uint64_t desired, int pe,
           const Array& result, nb::handle s) {
          const symcommStream_t st = stream_of(s);  // with the GIL held
          SYMCOMM_PY_CALL(symcommAtomicCompareSwapOnStream(
              self.get(), word_of(word, "compare_swap"), expected, desired, pe,
              word_of(result, "compare_swap"), st));
        },
        nb::arg("word"), nb::arg("expected"), nb::arg("desired"), nb::arg("pe"),
        nb::arg("result"), stream,
        "Sets rank pe's copy of the word to desired where it equals expected; the old value "
        "goes to result.");
}

}  // namespace symcomm_py
