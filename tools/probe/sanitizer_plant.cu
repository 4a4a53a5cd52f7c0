// Probe (scripts/gpu-check builds and runs it with nvcc before its compute-sanitizer steps):
// a planted error for each tool, so that a step that reports no error is known to have
// looked. Run as symrun's ranks, the way the steps run the tests:
//   compute-sanitizer --tool memcheck --target-processes all symrun -n 2 sanitizer_plant oob
//   compute-sanitizer --tool racecheck --target-processes all symrun -n 2 sanitizer_plant race
// `oob` writes one float past a cudaMalloc allocation (memcheck: an invalid global write);
// `race` has each thread of a block read, without a barrier, the shared word that a thread of
// the other warp wrote (racecheck: a read-after-write hazard; volatile keeps both accesses,
// and threads of one warp would not count, as racecheck leaves a warp's own accesses alone). Exits 0 whatever the tool finds: the tool's report is the result.
#include <cstdio>
#include <cstring>
#include <cuda_runtime.h>

__global__ void write_past(float* p, int n) {
  if (threadIdx.x == 0) p[n] = 1.0f;  // one past the end
}

__global__ void shared_race(int* out) {
  __shared__ int words[64];
  volatile int* w = words;
  w[threadIdx.x] = static_cast<int>(threadIdx.x);
  out[threadIdx.x] = w[63 - threadIdx.x];  // written by the other warp, no barrier between
}

int main(int argc, char** argv) {
  const bool race = argc > 1 && std::strcmp(argv[1], "race") == 0;
  const int n = 1000;
  void* p = nullptr;
  if (cudaMalloc(&p, n * sizeof(float)) != cudaSuccess) {
    std::printf("sanitizer_plant: cudaMalloc failed\n");
    return 1;
  }
  if (race) shared_race<<<1, 64>>>(static_cast<int*>(p));
  else write_past<<<1, 32>>>(static_cast<float*>(p), n);
  cudaError_t e = cudaDeviceSynchronize();
  std::printf("sanitizer_plant %s: %s\n", race ? "race" : "oob", cudaGetErrorString(e));
  cudaFree(p);
  return 0;
}
