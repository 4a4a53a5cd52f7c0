// Probe (built with -DSYMCOMM_BUILD_PROBES=ON into build/probe/; or nvcc memop_host.cu -lcuda):
// Which host memory accepts stream memory operations (cuStreamWriteValue64/WaitValue64)?
#include <cuda.h>
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdlib>
int main() {
  cudaSetDevice(0);
  cudaFree(0);
  cudaStream_t s; cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  int attr = 0; CUdevice d; cuDeviceGet(&d, 0);
  cuDeviceGetAttribute(&attr, CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS, d);
  printf("64-bit memops: %d\n", attr);
  cuDeviceGetAttribute(&attr, CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM, d);
  printf("host pointer for registered mem: %d\n", attr);
  auto tryit = [&](const char* what, void* p) {
    CUresult w = cuStreamWriteValue64(s, (CUdeviceptr)p, 7, CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER);
    CUresult w2 = cuStreamWriteValue64(s, (CUdeviceptr)p, 7, CU_STREAM_WRITE_VALUE_DEFAULT);
    CUresult w3 = cuStreamWriteValue32(s, (CUdeviceptr)p, 7, CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER);
    printf("write32(nobarrier)=%d ", w3);
    CUresult v = cuStreamWaitValue64(s, (CUdeviceptr)p, 7, CU_STREAM_WAIT_VALUE_GEQ);
    cudaError_t e = cudaStreamSynchronize(s);
    printf("%-40s write(nobarrier)=%d write(default)=%d wait=%d sync=%d\n", what, w, w2, v, e);
  };
  void* a; cudaHostAlloc(&a, 4096, cudaHostAllocMapped); void* ad; cudaHostGetDevicePointer(&ad, a, 0);
  tryit("cudaHostAlloc mapped (device ptr)", ad);
  void* b; cudaHostAlloc(&b, 4096, cudaHostAllocMapped | cudaHostAllocPortable); void* bd; cudaHostGetDevicePointer(&bd, b, 0);
  tryit("cudaHostAlloc mapped|portable", bd);
  void* c = aligned_alloc(4096, 4096);
  CUresult r = cuMemHostRegister(c, 4096, CU_MEMHOSTREGISTER_DEVICEMAP); CUdeviceptr cd = 0;
  cuMemHostGetDevicePointer(&cd, c, 0);
  printf("cuMemHostRegister=%d\n", r);
  tryit("cuMemHostRegister DEVICEMAP", (void*)cd);
  void* h; CUresult r2 = cuMemHostAlloc(&h, 4096, CU_MEMHOSTALLOC_DEVICEMAP); CUdeviceptr hd = 0;
  cuMemHostGetDevicePointer(&hd, h, 0);
  printf("cuMemHostAlloc=%d\n", r2);
  tryit("cuMemHostAlloc DEVICEMAP", (void*)hd);
  void* g; cudaMalloc(&g, 4096);
  tryit("cudaMalloc", g);
  return 0;
}
