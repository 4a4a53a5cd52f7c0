// Collectives, send/recv and groups, the barrier on a stream, pre-multiplied sums: the
// counts from the arrays' sizes, checked against the team's size before the call.
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bind.h"

namespace symcomm_py {

namespace {

using Alg = std::optional<std::string>;

// IEEE half from float bits, rounded to nearest even (overflow to infinity, NaN kept).
uint16_t float_to_half(uint32_t f) {
  const uint32_t sign = (f >> 16) & 0x8000u;
  const int32_t exp = static_cast<int32_t>((f >> 23) & 0xffu) - 127 + 15;
  uint32_t mant = f & 0x7fffffu;
  if (((f >> 23) & 0xffu) == 0xffu) return static_cast<uint16_t>(sign | 0x7c00u | (mant ? 0x200u : 0));
  if (exp >= 31) return static_cast<uint16_t>(sign | 0x7c00u);
  if (exp <= 0) {  // subnormal half, or zero
    if (exp < -10) return static_cast<uint16_t>(sign);
    mant |= 0x800000u;
    const uint32_t shift = static_cast<uint32_t>(14 - exp);
    uint32_t h = mant >> shift;
    const uint32_t rest = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rest > half || (rest == half && (h & 1u))) ++h;
    return static_cast<uint16_t>(sign | h);
  }
  uint32_t h = (static_cast<uint32_t>(exp) << 10) | (mant >> 13);
  const uint32_t rest = mant & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;  // may carry into the exponent
  return static_cast<uint16_t>(sign | h);
}
const char* alg(const Alg& a) { return a ? a->c_str() : nullptr; }

// `what`'s buffer holds `want` elements.
void holds(const Array& a, size_t want, const char* op, const char* what) {
  if (a.size() != want)
    invalid(std::string(op) + ": " + what + " holds " + std::to_string(a.size()) +
            " elements, not " + std::to_string(want));
}

// The call's target when recv is None: in place (send).
const Array& in_place(const std::optional<Array>& recv, const Array& send) {
  return recv ? *recv : send;
}

// `x` as one element of `t` (symcommScalarHost's form): floats rounded to nearest even,
// integers truncated towards zero; fp8 has no pre-multiplied sums here.
std::vector<uint8_t> scalar_bytes(double x, symcommDataType_t t) {
  std::vector<uint8_t> out(8, 0);
  auto put = [&](auto v) { std::memcpy(out.data(), &v, sizeof v); };
  const float f = static_cast<float>(x);
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  switch (t) {
    case symcommInt8: put(static_cast<int8_t>(x)); break;
    case symcommUint8: put(static_cast<uint8_t>(x)); break;
    case symcommInt32: put(static_cast<int32_t>(x)); break;
    case symcommUint32: put(static_cast<uint32_t>(x)); break;
    case symcommInt64: put(static_cast<int64_t>(x)); break;
    case symcommUint64: put(static_cast<uint64_t>(x)); break;
    case symcommFloat32: put(f); break;
    case symcommFloat64: put(x); break;
    case symcommBfloat16:  // the top half of the float, rounded to nearest even
      put(static_cast<uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16));
      break;
    case symcommFloat16: put(float_to_half(bits)); break;
    default: invalid("premul_sum: no pre-multiplied sums of fp8 types");
  }
  return out;
}

}  // namespace

void bind_coll(nb::module_& m, nb::class_<Comm>& c) {
  const auto stream = nb::arg("stream") = nb::none();
  const auto team = nb::arg("team") = 0;
  const auto algorithm = nb::arg("algorithm") = nb::none();

  c.def("all_reduce",
        [](const Comm& self, const Array& send, std::optional<Array> recv, nb::handle op,
           symcommTeam_t team, Alg a, nb::handle s) {
          const Array& out = in_place(recv, send);
          const symcommDataType_t t = same_type(send, out, "all_reduce");
          holds(out, send.size(), "all_reduce", "recv");
          const symcommStream_t st = stream_of(s);  // with the GIL held
          const symcommRedOp_t o = redop_of(op);
          SYMCOMM_PY_CALL(symcommAllReduceOnStream(self.get(), team, at(send), at(out),
                                                   send.size(), t, o, alg(a), st));
        },
        nb::arg("send"), nb::arg("recv") = nb::none(), nb::arg("op") = "sum", team, algorithm,
        stream, "recv = op over the team of every member's send (recv None: in place).");
  c.def("all_gather",
        [](const Comm& self, const Array& send, const Array& recv, symcommTeam_t team, Alg a,
           nb::handle s) {
          const symcommDataType_t t = same_type(send, recv, "all_gather");
          holds(recv, send.size() * static_cast<size_t>(self.team_size(team)), "all_gather",
                "recv (team size x send)");
          const symcommStream_t st = stream_of(s);  // with the GIL held
          SYMCOMM_PY_CALL(symcommAllGatherOnStream(self.get(), team, at(send), at(recv),
                                                   send.size(), t, alg(a), st));
        },
        nb::arg("send"), nb::arg("recv"), team, algorithm, stream,
        "recv = every member's send, in team-rank order.");
  c.def("reduce_scatter",
        [](const Comm& self, const Array& send, const Array& recv, nb::handle op,
           symcommTeam_t team, Alg a, nb::handle s) {
          const symcommDataType_t t = same_type(send, recv, "reduce_scatter");
          holds(send, recv.size() * static_cast<size_t>(self.team_size(team)), "reduce_scatter",
                "send (team size x recv)");
          const symcommStream_t st = stream_of(s);  // with the GIL held
          const symcommRedOp_t o = redop_of(op);
          SYMCOMM_PY_CALL(symcommReduceScatterOnStream(self.get(), team, at(send),
                                                       at(recv), recv.size(), t,
                                                       o, alg(a), st));
        },
        nb::arg("send"), nb::arg("recv"), nb::arg("op") = "sum", team, algorithm, stream,
        "recv of member j = op over the team of block j of every member's send.");
  c.def("all_to_all",
        [](const Comm& self, const Array& send, const Array& recv, symcommTeam_t team, Alg a,
           nb::handle s) {
          const symcommDataType_t t = same_type(send, recv, "all_to_all");
          const size_t n = static_cast<size_t>(self.team_size(team));
          holds(recv, send.size(), "all_to_all", "recv (as send)");
          if (send.size() % n)
            invalid("all_to_all: send holds " + std::to_string(send.size()) +
                    " elements, not a multiple of the team's size " + std::to_string(n));
          const symcommStream_t st = stream_of(s);  // with the GIL held
          SYMCOMM_PY_CALL(symcommAllToAllOnStream(self.get(), team, at(send), at(recv),
                                                  send.size() / n, t, alg(a), st));
        },
        nb::arg("send"), nb::arg("recv"), team, algorithm, stream,
        "Block j of recv = block (this member) of member j's send.");
  c.def("all_to_all_v",
        [](const Comm& self, const Array& send, std::vector<size_t> send_counts,
           std::vector<size_t> send_displs, const Array& recv, std::vector<size_t> recv_counts,
           std::vector<size_t> recv_displs, symcommTeam_t team, Alg a, nb::handle s) {
          const symcommDataType_t t = same_type(send, recv, "all_to_all_v");
          const size_t n = static_cast<size_t>(self.team_size(team));
          for (const auto* v : {&send_counts, &send_displs, &recv_counts, &recv_displs})
            if (v->size() != n)
              invalid("all_to_all_v: counts and displacements have one entry per member (" +
                      std::to_string(n) + "), not " + std::to_string(v->size()));
          for (size_t j = 0; j < n; ++j) {
            if (send_counts[j] && send_displs[j] + send_counts[j] > send.size())
              invalid("all_to_all_v: send block " + std::to_string(j) + " runs past send");
            if (recv_counts[j] && recv_displs[j] + recv_counts[j] > recv.size())
              invalid("all_to_all_v: recv block " + std::to_string(j) + " runs past recv");
          }
          const symcommStream_t st = stream_of(s);  // with the GIL held
          SYMCOMM_PY_CALL(symcommAllToAllvOnStream(
              self.get(), team, at(send), send_counts.data(), send_displs.data(), at(recv),
              recv_counts.data(), recv_displs.data(), t, alg(a), st));
        },
        nb::arg("send"), nb::arg("send_counts"), nb::arg("send_displs"), nb::arg("recv"),
        nb::arg("recv_counts"), nb::arg("recv_displs"), team, algorithm, stream,
        "All-to-all with counts and displacements (elements, one per member) on the host.");
  c.def("broadcast",
        [](const Comm& self, const Array& send, std::optional<Array> recv, int root,
           symcommTeam_t team, Alg a, nb::handle s) {
          const Array& out = in_place(recv, send);
          const symcommDataType_t t = same_type(send, out, "broadcast");
          holds(out, send.size(), "broadcast", "recv");
          const symcommStream_t st = stream_of(s);  // with the GIL held
          SYMCOMM_PY_CALL(symcommBroadcastOnStream(self.get(), team, at(send), at(out),
                                                   send.size(), t, root, alg(a), st));
        },
        nb::arg("send"), nb::arg("recv") = nb::none(), nb::arg("root") = 0, team, algorithm,
        stream, "recv of every member = send of member root (recv None: in place).");
  c.def("reduce",
        [](const Comm& self, const Array& send, std::optional<Array> recv, nb::handle op,
           int root, symcommTeam_t team, Alg a, nb::handle s) {
          const bool is_root = self.team_rank(team) == root;
          if (is_root && !recv) invalid("reduce: the root passes a recv array");
          symcommDataType_t t = type_of(send);
          if (recv) {
            t = same_type(send, *recv, "reduce");
            holds(*recv, send.size(), "reduce", "recv");
          }
          const symcommStream_t st = stream_of(s);  // with the GIL held
          const symcommRedOp_t o = redop_of(op);
          SYMCOMM_PY_CALL(symcommReduceOnStream(self.get(), team, at(send),
                                                recv ? at(*recv) : nullptr, send.size(), t,
                                                o, root, alg(a), st));
        },
        nb::arg("send"), nb::arg("recv") = nb::none(), nb::arg("op") = "sum",
        nb::arg("root") = 0, team, algorithm, stream,
        "recv of member root = op over the team of every member's send (others: recv None).");
  c.def("gather",
        [](const Comm& self, const Array& send, std::optional<Array> recv, int root,
           symcommTeam_t team, Alg a, nb::handle s) {
          const bool is_root = self.team_rank(team) == root;
          if (is_root && !recv) invalid("gather: the root passes a recv array");
          symcommDataType_t t = type_of(send);
          if (recv) t = same_type(send, *recv, "gather");
          if (is_root)
            holds(*recv, send.size() * static_cast<size_t>(self.team_size(team)), "gather",
                  "recv (team size x send)");
          const symcommStream_t st = stream_of(s);  // with the GIL held
          SYMCOMM_PY_CALL(symcommGatherOnStream(self.get(), team, at(send),
                                                recv ? at(*recv) : nullptr, send.size(), t,
                                                root, alg(a), st));
        },
        nb::arg("send"), nb::arg("recv") = nb::none(), nb::arg("root") = 0, team, algorithm,
        stream, "recv of member root = every member's send, in team-rank order.");
  c.def("scatter",
        [](const Comm& self, std::optional<Array> send, const Array& recv, int root,
           symcommTeam_t team, Alg a, nb::handle s) {
          const bool is_root = self.team_rank(team) == root;
          if (is_root && !send) invalid("scatter: the root passes a send array");
          symcommDataType_t t = type_of(recv);
          if (send) t = same_type(*send, recv, "scatter");
          if (is_root)
            holds(*send, recv.size() * static_cast<size_t>(self.team_size(team)), "scatter",
                  "send (team size x recv)");
          const symcommStream_t st = stream_of(s);  // with the GIL held
          SYMCOMM_PY_CALL(symcommScatterOnStream(self.get(), team, send ? at(*send) : nullptr,
                                                 at(recv), recv.size(), t, root, alg(a), st));
        },
        nb::arg("send").none(), nb::arg("recv"), nb::arg("root") = 0, team, algorithm, stream,
        "recv of member j = block j of member root's send (others: send None).");
  c.def("send",
        [](const Comm& self, const Array& buf, int peer, symcommTeam_t team, nb::handle s) {
          const symcommStream_t st = stream_of(s);  // with the GIL held
          SYMCOMM_PY_CALL(symcommSendOnStream(self.get(), team, at(buf), buf.size(),
                                              type_of(buf), peer, st));
        },
        nb::arg("buf"), nb::arg("peer"), team, stream,
        "Sends buf to member peer, matched in order with its recv from this member.");
  c.def("recv",
        [](const Comm& self, const Array& buf, int peer, symcommTeam_t team, nb::handle s) {
          const symcommStream_t st = stream_of(s);  // with the GIL held
          SYMCOMM_PY_CALL(symcommRecvOnStream(self.get(), team, at(buf), buf.size(),
                                              type_of(buf), peer, st));
        },
        nb::arg("buf"), nb::arg("peer"), team, stream, "Receives into buf from member peer.");
  c.def("barrier",
        [](const Comm& self, symcommTeam_t team, nb::handle s) {
          const symcommStream_t st = stream_of(s);  // with the GIL held
          SYMCOMM_PY_CALL(symcommBarrierOnStream(self.get(), team, st));
        },
        team, stream, "A barrier of the team in the stream's order.");
  c.def("premul_sum",
        [](const Comm& self, double scalar, nb::handle dtype) {
          const symcommDataType_t t = type_named(dtype);
          const std::vector<uint8_t> value = scalar_bytes(scalar, t);  // read by this call
          symcommRedOp_t op;
          check(symcommRedOpCreatePreMulSum(&op, value.data(), t, symcommScalarHost, self.get()));
          return static_cast<int>(op);
        },
        nb::arg("scalar"), nb::arg("dtype"),
        "An op for all_reduce, reduce_scatter and reduce of dtype: each member's input "
        "multiplied by scalar, then summed. Not collective; destroy_op() frees it.");
  c.def("destroy_op",
        [](const Comm& self, int op) {
          check(symcommRedOpDestroy(static_cast<symcommRedOp_t>(op), self.get()));
        },
        nb::arg("op"));
  m.def("group_start", [] { check(symcommGroupStart()); },
        "Calls until group_end() on this thread are issued as one unit (symcommGroupStart).");
  m.def("group_end",
        [] {
          nb::gil_scoped_release release;
          check(symcommGroupEnd());
        });
}

}  // namespace symcomm_py
