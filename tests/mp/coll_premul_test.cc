// Pre-multiplied sums (symcommRedOpCreatePreMulSum), for every algorithm that runs the
// reductions on plain buffers (the op's input is a buffer of the call's own): all-reduce (also
// in place), reduce-scatter and reduce, integer and float types, the scalar on the host (read
// when the op is made) and in the space's memory (read when each call runs: changed between
// calls). Inputs and scalars are small, so that every product and sum is exact in the type and
// the reference is exact. Then the op's misuse: another type, destroyed, never made.
#include "coll_fixture.h"

namespace coll_test {

namespace {

// A scalar that every type holds exactly, and a different one for the second call.
double first_scalar(const Type& t) { return t.id == symcommInt32 ? 3 : 0.5; }
double second_scalar(const Type& t) { return t.id == symcommInt32 ? -2 : 0.25; }

// Element i as a double: int32, or a float type (load()).
double read(const Type& t, const uint8_t* p) {
  if (t.id != symcommInt32) return load(t, p);
  int32_t x;
  std::memcpy(&x, p, 4);
  return x;
}

}  // namespace

TEST_P(Coll, PreMultipliedSum) {
  if (lacks({Op::AllReduce})) GTEST_SKIP() << algo_ << " does no all-reduce";
  if (refuses(Op::AllReduce, false)) GTEST_SKIP() << algo_ << " writes in place only";
  const size_t count = 3001;
  const size_t nn = static_cast<size_t>(n_), me = static_cast<size_t>(me_);
  for (int ti : {1, 4, 6, 7}) {  // int32, float16, float32, float64
    const Type& t = kTypes[ti];
    for (symcommScalarResidence_t where : {symcommScalarHost, symcommScalarDevice}) {
      SCOPED_TRACE(std::string(t.name) + (where == symcommScalarHost ? ", host" : ", device") +
                   " scalar");
      // Every rank's input: count * n elements (reduce-scatter's), small integers.
      auto value = [&](size_t r, size_t i) {
        return static_cast<double>(static_cast<int>((r * 7 + i * 3 + seed_) % 17) - 8);
      };
      std::vector<uint8_t> in(count * nn * t.size);
      for (size_t i = 0; i < count * nn; ++i) store(t, &in[i * t.size], value(me, i));
      void* send = buffer(in.size(), false);
      void* recv = buffer(in.size(), false);
      void* scalar_mem = buffer(8, false);
      std::vector<uint8_t> s(8);
      store(t, s.data(), first_scalar(t));
      put(scalar_mem, s);
      mp::sync(stream_);
      symcommRedOp_t op;
      SC_OK(symcommRedOpCreatePreMulSum(&op, where == symcommScalarHost ? s.data() : scalar_mem,
                                        t.id, where, comm_));
      EXPECT_GE(static_cast<int>(op), static_cast<int>(symcommNumRedOps));
      auto want = [&](size_t i, double scalar) {
        double sum = 0;
        for (size_t r = 0; r < nn; ++r) sum += scalar * value(r, i);
        return sum;
      };
      auto check = [&](const void* p, size_t n, size_t first, double scalar, const char* what) {
        const std::vector<uint8_t> got = fetch(p, n * t.size);
        size_t wrong = 0;
        for (size_t i = 0; i < n; ++i)
          wrong += read(t, &got[i * t.size]) != want(first + i, scalar);
        EXPECT_EQ(wrong, 0u) << what;
      };
      for (int call = 0; call < 2; ++call) {
        // A device scalar changed before the second call is read by it; a host one is not.
        const double scalar =
            call == 1 && where == symcommScalarDevice ? second_scalar(t) : first_scalar(t);
        if (call == 1) {
          store(t, s.data(), second_scalar(t));  // the host copy changes too: not read again
          put(scalar_mem, s);
          mp::sync(stream_);
        }
        put(send, in);
        poison(recv, in.size());
        SC_OK(symcommAllReduceOnStream(comm_, SYMCOMM_TEAM_WORLD, send, recv, count, t.id, op,
                                       algo_, stream_));
        check(recv, count, 0, scalar, "all-reduce");
        if (!refuses(Op::ReduceScatter, false)) {
          poison(recv, in.size());
          SC_OK(symcommReduceScatterOnStream(comm_, SYMCOMM_TEAM_WORLD, send, recv, count, t.id,
                                             op, algo_, stream_));
          check(recv, count, me * count, scalar, "reduce-scatter");
        }
        if (!refuses(Op::Reduce, false)) {
          const int root = call % n_;
          poison(recv, in.size());
          SC_OK(symcommReduceOnStream(comm_, SYMCOMM_TEAM_WORLD, send, recv, count, t.id, op,
                                      root, algo_, stream_));
          if (me_ == root) check(recv, count, 0, scalar, "reduce");
        }
        // In place: the input is multiplied into the call's own buffer, recv keeps the sum.
        put(recv, in);
        SC_OK(symcommAllReduceOnStream(comm_, SYMCOMM_TEAM_WORLD, recv, recv, count, t.id, op,
                                       algo_, stream_));
        check(recv, count, 0, scalar, "all-reduce in place");
      }
      SC_FAILS_SAYING(symcommAllReduceOnStream(comm_, SYMCOMM_TEAM_WORLD, send, recv, count,
                                               t.id == symcommInt32 ? symcommFloat32
                                                                    : symcommInt32,
                                               op, algo_, stream_),
                      symcommInvalidArgument, "multiplies by a scalar of type");
      SC_OK(symcommRedOpDestroy(op, comm_));
      SC_FAILS_SAYING(symcommAllReduceOnStream(comm_, SYMCOMM_TEAM_WORLD, send, recv, count, t.id,
                                               op, algo_, stream_),
                      symcommInvalidArgument, "is not a symcommRedOp_t");
      SC_FAILS(symcommRedOpDestroy(op, comm_), symcommInvalidArgument);
      mp::sync(stream_);
      release(send, false);
      release(recv, false);
      release(scalar_mem, false);
    }
  }
}

TEST_P(Coll, PreMultipliedSumBadArguments) {
  if (algo_ != std::string("auto")) GTEST_SKIP() << "the checks are the C API's: once";
  const float one = 1;
  symcommRedOp_t op;
  SC_FAILS(symcommRedOpCreatePreMulSum(nullptr, &one, symcommFloat32, symcommScalarHost, comm_),
           symcommInvalidArgument);
  SC_FAILS(symcommRedOpCreatePreMulSum(&op, nullptr, symcommFloat32, symcommScalarHost, comm_),
           symcommInvalidArgument);
  SC_FAILS(symcommRedOpCreatePreMulSum(&op, &one, static_cast<symcommDataType_t>(42),
                                       symcommScalarHost, comm_),
           symcommInvalidArgument);
  SC_FAILS(symcommRedOpCreatePreMulSum(&op, &one, symcommFloat32,
                                       static_cast<symcommScalarResidence_t>(7), comm_),
           symcommInvalidArgument);
  SC_FAILS(symcommRedOpCreatePreMulSum(&op, &one, symcommFloat32, symcommScalarHost, nullptr),
           symcommInvalidArgument);
  SC_FAILS(symcommRedOpDestroy(symcommSum, comm_), symcommInvalidArgument);
  SC_FAILS(symcommRedOpDestroy(static_cast<symcommRedOp_t>(1000), comm_), symcommInvalidArgument);
}

}  // namespace coll_test
