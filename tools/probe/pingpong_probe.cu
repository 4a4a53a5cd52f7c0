// Probe (built with -DSYMCOMM_BUILD_PROBES=ON into build/probe/): what each part of the
// library's device ping-pong costs against raw loads and stores. One process, GPUs 0 and 1
// with peer access, a DeviceComm built by hand (team of 2, no abort flag, no error slot).
//   nvcc -O3 -std=c++17 -arch=sm_90 -Iinclude tools/probe/pingpong_probe.cu -o pp && ./pp
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "symcomm/device.cuh"

#include "probe_check.h"

using symcomm::DeviceComm;

namespace {

// Raw: a relaxed store to a pointer computed once. Lib: symcomm::signal_op. Branch: an
// address computation with a branch on pe < NEAR to either read.
enum class Sig { Raw, Lib, LibGlobal, Branch };
// Raw: an acquire poll, unbounded. Lib: symcomm::signal_wait_until. Counted: a loop with a
// counter test in every poll. Global: .global loads.
enum class Wait { Raw, RawGlobal, Lib, Counted, Unrolled, UnrolledGlobal, VolatileThenAcquire };

using symcomm::detail::load_acquire;

__device__ __forceinline__ uint64_t ld_rlx(const uint64_t* p) {
  uint64_t v;
  asm volatile("ld.relaxed.sys.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
using symcomm::detail::store_relaxed;

__device__ __forceinline__ uint64_t ld_acq_g(const uint64_t* p) {
  uint64_t v;
  asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void st_rlx_g(uint64_t* p, uint64_t v) {
  asm volatile("st.relaxed.sys.global.u64 [%0], %1;" : : "l"(p), "l"(v) : "memory");
}

template <Sig S>
__device__ __forceinline__ void do_signal(const DeviceComm& c, uint64_t* sig, uint64_t* theirs,
                                          int peer, uint64_t v) {
  if constexpr (S == Sig::Raw) {
    store_relaxed(theirs, v);
  } else if constexpr (S == Sig::Lib) {
    symcomm::signal_op(c, sig, v, symcommSignalSet, peer);
  } else if constexpr (S == Sig::LibGlobal) {
    st_rlx_g(symcomm::detail::remote(c, sig, peer), v);
  } else {
    char* w = peer < SYMCOMM_DEVICE_COMM_NEAR ? c.near_base[peer]
                                              : c.peer_base[symcomm::world_rank(c, peer)];
    store_relaxed(reinterpret_cast<uint64_t*>(w + (reinterpret_cast<char*>(sig) - c.base)), v);
  }
}

template <Wait W>
__device__ __forceinline__ int do_wait(const DeviceComm& c, uint64_t* sig, uint64_t v) {
  if constexpr (W == Wait::Raw) {
    while (load_acquire(sig) < v) {
    }
    return 0;
  } else if constexpr (W == Wait::RawGlobal) {
    while (ld_acq_g(sig) < v) {
    }
    return 0;
  } else if constexpr (W == Wait::Lib) {
    return symcomm::signal_wait_until(c, sig, symcommCmpGe, v);
  } else if constexpr (W == Wait::Counted) {
    uint64_t seen = load_acquire(sig), start = 0;
    if (seen >= v) return 0;
    for (uint32_t polls = 1;; ++polls) {
      seen = load_acquire(sig);
      if (seen >= v) return 0;
      if (polls % 1024 == 0) {
        const uint64_t now = symcomm::detail::global_time_ns();
        if (start == 0) start = now;
        if (c.abort_flag != nullptr && *c.abort_flag != 0) return symcommPeerLost;
        if (c.wait_timeout_ns != 0 && now - start > c.wait_timeout_ns) return symcommTimeout;
      }
    }
  } else if constexpr (W == Wait::Unrolled || W == Wait::UnrolledGlobal) {
    uint64_t start = 0, seen = 0;
    for (;;) {
#pragma unroll 8
      for (int i = 0; i < 1024; ++i) {
        seen = W == Wait::Unrolled ? load_acquire(sig) : ld_acq_g(sig);
        if (symcomm::compare(seen, symcommCmpGe, v)) return 0;
      }
      const uint64_t now = symcomm::detail::global_time_ns();
      if (start == 0) start = now;
      if (c.abort_flag != nullptr && *c.abort_flag != 0) return symcommPeerLost;
      if (c.wait_timeout_ns != 0 && now - start > c.wait_timeout_ns) return symcommTimeout;
    }
  } else {
    uint64_t start = 0;
    for (;;) {
      for (int i = 0; i < 1024; ++i) {
        if (symcomm::compare(ld_rlx(sig), symcommCmpGe, v) &&
            symcomm::compare(load_acquire(sig), symcommCmpGe, v))
          return 0;
      }
      const uint64_t now = symcomm::detail::global_time_ns();
      if (start == 0) start = now;
      if (c.abort_flag != nullptr && *c.abort_flag != 0) return symcommPeerLost;
      if (c.wait_timeout_ns != 0 && now - start > c.wait_timeout_ns) return symcommTimeout;
    }
  }
}

template <Sig S, Wait W>
__global__ void pp(const __grid_constant__ DeviceComm c, uint64_t* sig, uint64_t* theirs, int peer,
                   int rounds, bool first, int* status) {
  int rc = 0;
  for (int i = 1; i <= rounds && rc == 0; ++i) {
    const uint64_t v = static_cast<uint64_t>(i);
    if (first) {
      do_signal<S>(c, sig, theirs, peer, v);
      rc = do_wait<W>(c, sig, v);
    } else {
      rc = do_wait<W>(c, sig, v);
      do_signal<S>(c, sig, theirs, peer, v);
    }
  }
  if (rc) *status = rc;
}

using Kernel = void (*)(DeviceComm, uint64_t*, uint64_t*, int, int, bool, int*);
struct Case {
  const char* name;
  Kernel k;
};
const Case kCases[] = {
    {"raw_signal+raw_wait", pp<Sig::Raw, Wait::Raw>},
    {"lib_signal+lib_wait", pp<Sig::Lib, Wait::Lib>},
    {"lib_signal+raw_wait", pp<Sig::Lib, Wait::Raw>},
    {"raw_signal+lib_wait", pp<Sig::Raw, Wait::Lib>},
    {"branch_signal+raw_wait", pp<Sig::Branch, Wait::Raw>},
    {"branch_signal+counted_wait", pp<Sig::Branch, Wait::Counted>},
    {"raw_signal+counted_wait", pp<Sig::Raw, Wait::Counted>},
    {"libglobal_signal+raw_wait", pp<Sig::LibGlobal, Wait::Raw>},
    {"raw_signal+rawglobal_wait", pp<Sig::Raw, Wait::RawGlobal>},
    {"raw_signal+unrolled_wait", pp<Sig::Raw, Wait::Unrolled>},
    {"raw_signal+unrolledglobal_wait", pp<Sig::Raw, Wait::UnrolledGlobal>},
    {"raw_signal+vol_then_acq_wait", pp<Sig::Raw, Wait::VolatileThenAcquire>},
    {"raw_signal+raw_wait(again)", pp<Sig::Raw, Wait::Raw>},
    {"lib_signal+lib_wait(again)", pp<Sig::Lib, Wait::Lib>},
};

}  // namespace

int main() {
  const int rounds = 4000, reps = 15;
  uint64_t* buf[2];
  char** peer_base[2];
  int* status[2];
  cudaStream_t st[2];
  for (int d = 0; d < 2; ++d) {
    CK(cudaSetDevice(d));
    CK(cudaDeviceEnablePeerAccess(1 - d, 0));
    CK(cudaMalloc(&buf[d], 4096));
    CK(cudaMalloc(&status[d], sizeof(int)));
    CK(cudaMemset(status[d], 0, sizeof(int)));
    CK(cudaStreamCreateWithFlags(&st[d], cudaStreamNonBlocking));
  }
  DeviceComm h[2];
  for (int d = 0; d < 2; ++d) {
    char* bases[2] = {reinterpret_cast<char*>(buf[0]), reinterpret_cast<char*>(buf[1])};
    CK(cudaSetDevice(d));
    CK(cudaMalloc(&peer_base[d], sizeof bases));
    CK(cudaMemcpy(peer_base[d], bases, sizeof bases, cudaMemcpyHostToDevice));
    DeviceComm& c = h[d];
    c = DeviceComm{};
    c.rank = d;
    c.nranks = 2;
    c.team_rank = d;
    c.team_size = 2;
    c.team_start = 0;
    c.team_stride = 1;
    c.base = bases[d];
    c.peer_base = peer_base[d];
    c.near_base[0] = bases[0];
    c.near_base[1] = bases[1];
    c.wait_timeout_ns = 10ull * 1000 * 1000 * 1000;
  }
  for (const Case& cs : kCases) {
    std::vector<double> t;
    for (int r = 0; r < reps + 2; ++r) {
      for (int d = 0; d < 2; ++d) {
        CK(cudaSetDevice(d));
        CK(cudaMemset(buf[d], 0, 8));
        CK(cudaDeviceSynchronize());
      }
      cudaEvent_t a, b;
      CK(cudaSetDevice(0));
      CK(cudaEventCreate(&a));
      CK(cudaEventCreate(&b));
      // The second rank first, so that the timed one does not wait for its launch.
      CK(cudaSetDevice(1));
      cs.k<<<1, 1, 0, st[1]>>>(h[1], buf[1], buf[0], 0, rounds, false, status[1]);
      CK(cudaGetLastError());
      CK(cudaSetDevice(0));
      CK(cudaEventRecord(a, st[0]));
      cs.k<<<1, 1, 0, st[0]>>>(h[0], buf[0], buf[1], 1, rounds, true, status[0]);
      CK(cudaGetLastError());
      CK(cudaEventRecord(b, st[0]));
      CK(cudaEventSynchronize(b));
      CK(cudaSetDevice(1));
      CK(cudaStreamSynchronize(st[1]));
      float ms;
      CK(cudaEventElapsedTime(&ms, a, b));
      if (r >= 2) t.push_back(1000.0 * ms / (2.0 * rounds));
      CK(cudaEventDestroy(a));
      CK(cudaEventDestroy(b));
    }
    int s0 = 0, s1 = 0;
    CK(cudaMemcpy(&s0, status[0], sizeof s0, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(&s1, status[1], sizeof s1, cudaMemcpyDeviceToHost));
    std::sort(t.begin(), t.end());
    std::printf("%-34s median %.4f us  min %.4f  max %.4f  status %d %d\n", cs.name,
                t[t.size() / 2], t.front(), t.back(), s0, s1);
  }
  return 0;
}
