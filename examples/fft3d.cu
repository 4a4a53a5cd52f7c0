// A distributed 3D complex-to-complex FFT on symcomm's pencil decomposition, and a Poisson
// solve on a periodic box with it.
//
//   symrun -n 8 build/bin/symcomm-fft3d [--n 512] [--grid 2x4] [--backend fused] [--iters 5]
//                                       [--buffers symmetric|local] [--json FILE]
//                                       [--machine NAME]
//
// Grid and backend are autotuned unless given (--grid 0x0 and --backend auto, the defaults):
// the fastest backend depends on the pencils' layout, and these are axis-contiguous.
// The data lives in two symmetric buffers (symcommMalloc) by default and each transpose goes
// from one to the other, so that every backend takes its direct path (peers read or write the
// buffers themselves: no staging copy); --buffers local keeps one cudaMalloc buffer and
// transposes in place, which the backends stage through the workspace.
//
// Forward: 1D FFTs along x on X-pencils, transpose X->Y, along y, Y->Z, along z; inverse the
// other way. Pencils are axis-contiguous, so every 1D FFT runs over contiguous lines (cuFFT
// batches on GPUs; a radix-2 or plain DFT on the CPU in the host memory space). Checks: a
// single Fourier mode transforms into one spike of height N, a random field comes back
// after forward and inverse, and the Poisson solution matches sin(x) sin(y) sin(z). During
// the checks every transpose's output buffer is poisoned first (NaN: with two symmetric
// buffers, the one the transpose writes; a local buffer is transposed in place), so that a
// point a transpose fails to write cannot pass with an earlier stage's value; a NaN anywhere
// fails the check it reaches.
//
// --json appends one record of symcomm-bench's format (bench/record.h, BENCH_FORMAT.md):
// bench "decomp", op "fft3d_c2c", impl "symcomm:<backend>", bytes the largest pencil of any
// rank, time_us per 3D FFT (one batch of --iters forward + inverse pairs, the slowest rank),
// tflops at 5 N log2 N, layout "axis_contiguous"; machine from --machine (default: GPU model x
// ranks, or "host"), commit from SYMCOMM_BENCH_COMMIT. --iters must be at least 1.
#include <cuda_runtime.h>
#include <cufft.h>

#include <chrono>
#include <cmath>
#include <complex>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "bench/record.h"
#include "check.h"
#include "symcomm/decomp.h"
#include "symcomm/symcomm.h"

namespace {

using cfloat = std::complex<float>;

#define CHECK_CUFFT(call)                                                                  \
  do {                                                                                     \
    cufftResult r_ = (call);                                                               \
    if (r_ != CUFFT_SUCCESS) {                                                             \
      std::fprintf(stderr, "%s failed: cuFFT error %d\n", #call, static_cast<int>(r_));    \
      std::exit(1);                                                                        \
    }                                                                                      \
  } while (0)

// --- 1D FFTs of contiguous lines on the CPU ---------------------------------------------

void fft_line(cfloat* a, int64_t n, int sign, std::vector<cfloat>& tmp) {
  if ((n & (n - 1)) == 0) {  // iterative radix 2
    for (int64_t i = 1, j = 0; i < n; ++i) {
      int64_t bit = n >> 1;
      for (; j & bit; bit >>= 1) j ^= bit;
      j ^= bit;
      if (i < j) std::swap(a[i], a[j]);
    }
    for (int64_t len = 2; len <= n; len <<= 1) {
      const double ang = sign * 2 * M_PI / static_cast<double>(len);
      const std::complex<double> wl(std::cos(ang), std::sin(ang));
      for (int64_t i = 0; i < n; i += len) {
        std::complex<double> w(1);
        for (int64_t k = 0; k < len / 2; ++k, w *= wl) {
          const std::complex<double> u = a[i + k], v = std::complex<double>(a[i + k + len / 2]) * w;
          a[i + k] = cfloat(u + v);
          a[i + k + len / 2] = cfloat(u - v);
        }
      }
    }
    return;
  }
  tmp.assign(static_cast<size_t>(n), 0);  // any other length: the plain DFT
  for (int64_t k = 0; k < n; ++k) {
    std::complex<double> s = 0;
    for (int64_t j = 0; j < n; ++j)
      s += std::complex<double>(a[j]) * std::polar(1.0, sign * 2 * M_PI * static_cast<double>(j * k % n) / n);
    tmp[static_cast<size_t>(k)] = cfloat(s);
  }
  std::copy(tmp.begin(), tmp.end(), a);
}

struct Fft {
  bool gpu;
  symcommDecomp_t decomp;
  symcommPencilInfo_t pencil[3];
  bool symmetric;   // two symmetric buffers, transposed from one to the other
  void* buf[2] = {nullptr, nullptr};  // (largest pencil's size each); local: buf[0] only
  int cur = 0;      // the buffer holding the pencil being transformed
  void* workspace;  // symmetric
  void* data() const { return buf[cur]; }
  cudaStream_t stream = nullptr;
  cufftHandle plan[3] = {0, 0, 0};
  size_t bytes = 0;     // of each buffer
  bool poison = false;  // during the checks: each transpose's output buffer poisoned first

  // Batched 1D transforms along the pencil's own (fastest) axis.
  void lines(int axis, int sign) {
    const symcommPencilInfo_t& p = pencil[axis];
    if (gpu) {
      CHECK_CUFFT(cufftExecC2C(plan[axis], static_cast<cufftComplex*>(data()),
                               static_cast<cufftComplex*>(data()),
                               sign < 0 ? CUFFT_FORWARD : CUFFT_INVERSE));
      return;
    }
    std::vector<cfloat> tmp;
    auto* a = static_cast<cfloat*>(data());
    for (int64_t line = 0; line < p.shape[1] * p.shape[2]; ++line)
      fft_line(a + line * p.shape[0], p.shape[0], sign, tmp);
  }
  void transpose(int from, int to) {
    const int next = symmetric ? 1 - cur : cur;
    // (Stream-ordered before the transpose, which peers write through only once this rank
    // has reached it.)
    if (poison && next != cur) {
      if (gpu) CHECK_CUDA(cudaMemsetAsync(buf[next], 0xff, bytes, stream));
      else std::memset(buf[next], 0xff, bytes);
    }
    CHECK_SC(symcommDecompTranspose(decomp, from, to, buf[cur], buf[next], workspace, symcommC32,
                                    nullptr, nullptr, nullptr, nullptr, stream));
    cur = next;
  }
  void forward() {  // X-pencil in, Z-pencil (spectrum) out
    lines(0, -1);
    transpose(0, 1);
    lines(1, -1);
    transpose(1, 2);
    lines(2, -1);
  }
  void inverse() {  // Z-pencil in, X-pencil out (unnormalised)
    lines(2, +1);
    transpose(2, 1);
    lines(1, +1);
    transpose(1, 0);
    lines(0, +1);
  }
  void sync() {
    if (gpu) CHECK_CUDA(cudaStreamSynchronize(stream));
  }
  std::vector<cfloat> read(int axis) {
    std::vector<cfloat> v(static_cast<size_t>(pencil[axis].size));
    sync();
    if (gpu) CHECK_CUDA(cudaMemcpy(v.data(), data(), v.size() * sizeof(cfloat), cudaMemcpyDeviceToHost));
    else std::memcpy(v.data(), data(), v.size() * sizeof(cfloat));
    return v;
  }
  void write(const std::vector<cfloat>& v) {
    if (gpu) CHECK_CUDA(cudaMemcpy(data(), v.data(), v.size() * sizeof(cfloat), cudaMemcpyHostToDevice));
    else std::memcpy(data(), v.data(), v.size() * sizeof(cfloat));
  }
};

// Calls f(x, y, z, index) for every point this rank owns in a pencil.
template <typename F>
void for_points(const symcommPencilInfo_t& p, F&& f) {
  for (int64_t z = p.lo[2]; z < p.hi[2]; ++z)
    for (int64_t y = p.lo[1]; y < p.hi[1]; ++y)
      for (int64_t x = p.lo[0]; x < p.hi[0]; ++x)
        f(x, y, z, static_cast<size_t>(symcommPencilIndex(&p, x, y, z)));
}

// The larger error, NaN if either is (std::max would drop a NaN: a poisoned point would pass).
double worse(double a, double b) {
  if (std::isnan(a)) return a;
  return std::isnan(b) || b > a ? b : a;
}

double max_over_ranks(symcommComm_t comm, int nranks, double v) {
  std::vector<double> all(static_cast<size_t>(nranks));
  CHECK_SC(symcommHostAllgather(comm, &v, all.data(), sizeof v));
  double m = 0;
  for (double x : all) m = worse(m, x);
  return m;
}

// The --json record. Timed: 2 * iters FFTs in one batch after one untimed forward + inverse.
bool write_record(const char* path, std::string machine, const Fft& f, const symcommDecompConfig_t& c,
                  int64_t n, int nranks, size_t bytes, const char* backend, int iters,
                  double time_us, double tflops, bool verified) {
  if (!std::isfinite(time_us) || !std::isfinite(tflops)) {
    std::fprintf(stderr, "symcomm-fft3d: the time (%g us) is not a number to record\n", time_us);
    return false;
  }
  if (machine.empty()) {
    cudaDeviceProp prop{};
    int device = 0;
    if (f.gpu) {
      CHECK_CUDA(cudaGetDevice(&device));
      CHECK_CUDA(cudaGetDeviceProperties(&prop, device));
    }
    machine = bench::machine_name(f.gpu ? prop.name : nullptr, nranks);
  }
  const std::string ns = std::to_string(n), grid = std::to_string(c.pdims[0]) + "x" +
                                                  std::to_string(c.pdims[1]);
  bench::Record r;
  r.bench = "decomp";
  r.op = "fft3d_c2c";
  r.impl = std::string("symcomm:") + backend;
  r.dtype = "c32";
  r.bytes = bytes;
  r.shape = "[" + ns + "," + ns + "," + ns + "] " + std::to_string(c.pdims[0]) + " x " +
            std::to_string(c.pdims[1]);
  r.ranks = nranks;
  r.time_us = time_us;
  r.tflops = tflops;
  r.iters = 2 * iters;
  r.warmup = 2;
  r.extra = {{"n", ns},
             {"grid", "\"" + grid + "\""},
             {"buffers", f.symmetric ? "\"symmetric\"" : "\"local\""},
             {"space", f.gpu ? "\"cuda\"" : "\"host\""},
             {"layout", "\"axis_contiguous\""},
             {"verified", verified ? "true" : "false"}};
  return bench::append_record(path, machine, r);
}

}  // namespace

int main(int argc, char** argv) {
  int64_t n = 64;
  int pr = 0, pc = 0, iters = 5;
  const char* json = nullptr;
  std::string machine;
  const char* backend = "auto";
  bool symmetric = true;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--n") && i + 1 < argc) n = std::atoll(argv[++i]);
    else if (!std::strcmp(argv[i], "--grid") && i + 1 < argc) std::sscanf(argv[++i], "%dx%d", &pr, &pc);
    else if (!std::strcmp(argv[i], "--backend") && i + 1 < argc) backend = argv[++i];
    else if (!std::strcmp(argv[i], "--iters") && i + 1 < argc) iters = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--json") && i + 1 < argc) json = argv[++i];
    else if (!std::strcmp(argv[i], "--machine") && i + 1 < argc) machine = argv[++i];
    else if (!std::strcmp(argv[i], "--buffers") && i + 1 < argc &&
             (!std::strcmp(argv[i + 1], "symmetric") || !std::strcmp(argv[i + 1], "local")))
      symmetric = !std::strcmp(argv[++i], "symmetric");
    else {
      std::fprintf(stderr, "usage: symrun -n N symcomm-fft3d [--n POINTS] [--grid PRxPC] "
                   "[--backend NAME|auto] [--iters K] [--buffers symmetric|local] [--json FILE] "
                   "[--machine NAME]\n");
      return 2;
    }
  }
  if (iters < 1) {
    std::fprintf(stderr, "symcomm-fft3d: --iters must be at least 1 (got %d)\n", iters);
    return 2;
  }
  symcommComm_t comm;
  CHECK_SC(symcommInitFromEnv(&comm, nullptr));
  int rank, nranks;
  symcommMemorySpace_t space;
  CHECK_SC(symcommCommRank(comm, &rank));
  CHECK_SC(symcommCommSize(comm, &nranks));
  CHECK_SC(symcommCommMemorySpace(comm, &space));
  Fft f{};
  f.gpu = space == symcommSpaceCuda;
  f.symmetric = symmetric;
  symcommDecompConfig_t c;
  CHECK_SC(symcommDecompConfigInit(&c));
  c.gdims[0] = c.gdims[1] = c.gdims[2] = n;
  c.pdims[0] = pr;
  c.pdims[1] = pc;
  c.autotune_type = symcommC32;
  std::snprintf(c.backend, sizeof c.backend, "%s", backend);
  for (int a = 0; a < 3; ++a) c.axis_contiguous[a] = 1;
  CHECK_SC(symcommDecompCreate(comm, &c, &f.decomp));
  CHECK_SC(symcommDecompGetConfig(f.decomp, &c));
  int64_t most = 0;
  for (int a = 0; a < 3; ++a) {
    CHECK_SC(symcommDecompPencilInfo(f.decomp, a, nullptr, nullptr, &f.pencil[a]));
    most = std::max(most, f.pencil[a].size);
  }
  size_t ws_bytes = 0;
  CHECK_SC(symcommDecompWorkspaceSize(f.decomp, symcommC32, &ws_bytes));
  CHECK_SC(symcommMalloc(comm, ws_bytes, &f.workspace));
  // Symmetric allocations are collective and equal in size on every rank: the largest pencil
  // of any rank.
  const size_t bytes = static_cast<size_t>(max_over_ranks(comm, nranks, static_cast<double>(most))) *
                       sizeof(cfloat);
  f.bytes = bytes;
  if (f.symmetric)
    for (void*& b : f.buf) CHECK_SC(symcommMalloc(comm, bytes, &b));
  if (f.gpu) {
    CHECK_CUDA(cudaStreamCreateWithFlags(&f.stream, cudaStreamNonBlocking));
    if (!f.symmetric) CHECK_CUDA(cudaMalloc(&f.buf[0], bytes));
    for (int a = 0; a < 3; ++a) {
      const symcommPencilInfo_t& p = f.pencil[a];
      CHECK_CUFFT(cufftPlan1d(&f.plan[a], static_cast<int>(p.shape[0]), CUFFT_C2C,
                              static_cast<int>(p.shape[1] * p.shape[2])));
      CHECK_CUFFT(cufftSetStream(f.plan[a], f.stream));
    }
  } else if (!f.symmetric) {
    f.buf[0] = std::malloc(bytes);
  }
  const double N = static_cast<double>(n) * n * n, two_pi = 2 * M_PI;
  bool ok = true;
  f.poison = true;  // checks 1 to 3

  // 1. One Fourier mode (2, 3, 5) becomes a spike of height N at that wavevector.
  const int64_t kx = 2 % n, ky = 3 % n, kz = 5 % n;
  std::vector<cfloat> u(static_cast<size_t>(f.pencil[0].size));
  for_points(f.pencil[0], [&](int64_t x, int64_t y, int64_t z, size_t i) {
    u[i] = cfloat(std::polar(1.0, two_pi * static_cast<double>(kx * x + ky * y + kz * z) / n));
  });
  f.write(u);
  f.forward();
  std::vector<cfloat> spec = f.read(2);
  double spike_err = 0;
  for_points(f.pencil[2], [&](int64_t x, int64_t y, int64_t z, size_t i) {
    const double want = (x == kx && y == ky && z == kz) ? N : 0.0;
    spike_err = worse(spike_err, std::abs(std::complex<double>(spec[i]) - want) / N);
  });
  spike_err = max_over_ranks(comm, nranks, spike_err);
  ok = ok && spike_err < 1e-4;

  // 2. A random field, forward and inverse, comes back (times N).
  std::mt19937 rng(1234 + static_cast<unsigned>(rank));
  std::uniform_real_distribution<float> dist(-1, 1);
  for (cfloat& v : u) v = cfloat(dist(rng), dist(rng));
  f.write(u);
  f.forward();
  f.inverse();
  std::vector<cfloat> back = f.read(0);
  double round_err = 0;
  for (size_t i = 0; i < u.size(); ++i)
    round_err = worse(round_err, std::abs(std::complex<double>(back[i]) / N - std::complex<double>(u[i])));
  round_err = max_over_ranks(comm, nranks, round_err);
  ok = ok && round_err < 1e-4;

  // 3. Poisson: lap(phi) = -3 sin x sin y sin z on [0, 2 pi)^3 has phi = sin x sin y sin z.
  auto grid = [&](int64_t i) { return two_pi * static_cast<double>(i) / static_cast<double>(n); };
  for_points(f.pencil[0], [&](int64_t x, int64_t y, int64_t z, size_t i) {
    u[i] = cfloat(static_cast<float>(-3 * std::sin(grid(x)) * std::sin(grid(y)) * std::sin(grid(z))), 0);
  });
  f.write(u);
  f.forward();
  spec = f.read(2);
  auto wave = [&](int64_t k) { return static_cast<double>(k <= n / 2 ? k : k - n); };
  for_points(f.pencil[2], [&](int64_t x, int64_t y, int64_t z, size_t i) {
    const double k2 = wave(x) * wave(x) + wave(y) * wave(y) + wave(z) * wave(z);
    spec[i] = k2 == 0 ? cfloat(0) : cfloat(std::complex<double>(spec[i]) / -k2);
  });
  f.write(spec);
  f.inverse();
  back = f.read(0);
  double poisson_err = 0;
  for_points(f.pencil[0], [&](int64_t x, int64_t y, int64_t z, size_t i) {
    const double want = std::sin(grid(x)) * std::sin(grid(y)) * std::sin(grid(z));
    poisson_err = worse(poisson_err, std::abs(std::complex<double>(back[i]) / N - want));
  });
  poisson_err = max_over_ranks(comm, nranks, poisson_err);
  ok = ok && poisson_err < 1e-4;

  // 4. Time: forward + inverse pairs; 5 N log2 N flops per 3D FFT.
  f.poison = false;
  f.write(u);
  f.forward();
  f.inverse();
  f.sync();
  CHECK_SC(symcommHostBarrier(comm));
  auto t0 = std::chrono::steady_clock::now();
  for (int k = 0; k < iters; ++k) {
    f.forward();
    f.inverse();
  }
  f.sync();
  double per_fft = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() /
                   (2.0 * iters);
  per_fft = max_over_ranks(comm, nranks, per_fft);
  const double gflops = 5 * N * std::log2(N) / per_fft / 1e9;
  if (rank == 0) {
    const char* backend = "";
    CHECK_SC(symcommDecompGetBackend(f.decomp, &backend));
    std::printf("symcomm 3D FFT, %lld^3 C2C fp32, %d ranks (%s space), grid %dx%d, backend %s, "
                "%s\n", static_cast<long long>(n), nranks, f.gpu ? "cuda" : "host", c.pdims[0],
                c.pdims[1], backend,
                f.symmetric ? "two symmetric buffers, out of place" : "local buffer, in place");
    std::printf("  single-mode spike error %.2e, round-trip error %.2e, Poisson error %.2e\n",
                spike_err, round_err, poisson_err);
    std::printf("  %.3f ms per 3D FFT, %.1f GFLOP/s (5 N log2 N)\n%s\n", per_fft * 1e3, gflops,
                ok ? "PASSED" : "FAILED");
    if (json && !write_record(json, machine, f, c, n, nranks, bytes, backend, iters,
                              per_fft * 1e6, gflops / 1e3, ok)) {
      std::fprintf(stderr, "symcomm-fft3d: cannot write %s\n", json);
      ok = false;
    }
  }
  if (f.gpu) {
    for (cufftHandle p : f.plan) cufftDestroy(p);
    if (!f.symmetric) CHECK_CUDA(cudaFree(f.buf[0]));
    CHECK_CUDA(cudaStreamDestroy(f.stream));
  } else if (!f.symmetric) {
    std::free(f.buf[0]);
  }
  if (f.symmetric)
    for (void* b : f.buf) CHECK_SC(symcommFree(comm, b));
  CHECK_SC(symcommFree(comm, f.workspace));
  CHECK_SC(symcommDecompDestroy(f.decomp));
  CHECK_SC(symcommFinalize(comm));
  return ok ? 0 : 1;
}
