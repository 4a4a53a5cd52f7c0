// symcomm-info: what this symcomm is and what it sees. Version and build options, the CUDA
// driver and devices, the peer-access matrix, and every environment parameter with its
// value and description. With --comm (under a launcher: symrun -n N symcomm-info --comm) it
// also joins a communicator and prints the node map and the peers each rank can reach.
#include <cuda.h>
#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "symcomm/decomp.h"
#include "symcomm/symcomm.h"

namespace {

void print_static();

using GetProc = CUresult (*)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*);

template <typename F>
F lookup(GetProc get, const char* name) {
  void* p = nullptr;
  CUdriverProcAddressQueryResult status;
  if (get(name, &p, CUDA_VERSION, CU_GET_PROC_ADDRESS_DEFAULT, &status) != CUDA_SUCCESS) return nullptr;
  return reinterpret_cast<F>(p);
}

void print_devices() {
  std::printf("\nCUDA driver and devices\n");
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    std::printf("  no CUDA driver (%s): communicators use the host memory space\n", dlerror());
    return;
  }
  auto get = reinterpret_cast<GetProc>(dlsym(lib, "cuGetProcAddress_v2"));
  auto init = get ? lookup<decltype(&cuInit)>(get, "cuInit") : nullptr;
  if (!init || init(0) != CUDA_SUCCESS) {
    std::printf("  the CUDA driver did not initialise: communicators use the host memory space\n");
    return;
  }
  auto version = lookup<decltype(&cuDriverGetVersion)>(get, "cuDriverGetVersion");
  auto count_fn = lookup<decltype(&cuDeviceGetCount)>(get, "cuDeviceGetCount");
  auto device = lookup<decltype(&cuDeviceGet)>(get, "cuDeviceGet");
  auto name_fn = lookup<decltype(&cuDeviceGetName)>(get, "cuDeviceGetName");
  auto attr = lookup<decltype(&cuDeviceGetAttribute)>(get, "cuDeviceGetAttribute");
  auto mem = lookup<decltype(&cuDeviceTotalMem)>(get, "cuDeviceTotalMem");
  auto peer = lookup<decltype(&cuDeviceCanAccessPeer)>(get, "cuDeviceCanAccessPeer");
  int v = 0, n = 0;
  version(&v);
  count_fn(&n);
  std::printf("  driver CUDA %d.%d, %d device(s)\n", v / 1000, v % 1000 / 10, n);
  for (int i = 0; i < n; ++i) {
    CUdevice d;
    device(&d, i);
    char name[128] = "?";
    name_fn(name, sizeof name, d);
    size_t bytes = 0;
    mem(&bytes, d);
    int major = 0, minor = 0, sms = 0, vmm = 0, fd = 0, fabric = 0, engines = 0;
    attr(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, d);
    attr(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, d);
    attr(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, d);
    attr(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, d);
    attr(&fd, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, d);
    attr(&fabric, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED, d);
    attr(&engines, CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT, d);
    std::printf("  %d: %s, sm_%d%d, %d SMs, %.1f GiB, VMM %d, fd handles %d, fabric handles %d, "
                "%d copy engines\n", i, name, major, minor, sms, bytes / 1073741824.0, vmm, fd,
                fabric, engines);
  }
  if (n < 2) return;
  std::printf("  peer access (row can access column):\n      ");
  for (int j = 0; j < n; ++j) std::printf("%3d", j);
  std::printf("\n");
  for (int i = 0; i < n; ++i) {
    std::printf("  %3d ", i);
    for (int j = 0; j < n; ++j) {
      int ok = 1;
      CUdevice a, b;
      device(&a, i);
      device(&b, j);
      if (i != j) peer(&ok, a, b);
      std::printf("%3s", i == j ? "-" : ok ? "Y" : "n");
    }
    std::printf("\n");
  }
}

void print_params() {
  std::printf("\nParameters (environment variables)\n");
  int n = symcommGetParamCount();
  for (int i = 0; i < n; ++i) {
    symcommParamInfo_t p;
    if (symcommGetParam(i, &p) != symcommSuccess) continue;
    std::printf("  %-28s %-7s = %-12s%s (default '%s'): %s\n", p.name, p.type,
                p.value[0] ? p.value : "''", p.is_set ? " [set]" : "", p.default_value,
                p.description);
  }
}

int print_comm() {
  symcommComm_t comm;
  if (symcommInitFromEnv(&comm, nullptr) != symcommSuccess) {
    std::fprintf(stderr, "symcomm-info: %s\n", symcommGetLastError());
    return 1;
  }
  int rank, size, local, local_size, node, nnodes, device;
  symcommMemorySpace_t space;
  symcommCommRank(comm, &rank);
  symcommCommSize(comm, &size);
  symcommCommLocalRank(comm, &local);
  symcommCommLocalSize(comm, &local_size);
  symcommCommNode(comm, &node, &nnodes);
  symcommCommDevice(comm, &device);
  symcommCommMemorySpace(comm, &space);
  std::string reach;
  for (int pe = 0; pe < size; ++pe) {
    int ok = 0;
    symcommPeerAccessible(comm, pe, &ok);
    reach += ok ? 'Y' : '.';
  }
  char host[64] = "?";
  gethostname(host, sizeof host - 1);
  // One line per rank, gathered to rank 0 so that the node map prints in order.
  char line[256];
  std::snprintf(line, sizeof line, "  rank %3d: node %d (%s) local %d/%d, %s space, device %d, "
                "load/store reach %s", rank, node, host, local, local_size,
                space == symcommSpaceCuda ? "cuda" : "host", device, reach.c_str());
  std::vector<char> all(sizeof line * static_cast<size_t>(size));
  int rc = symcommHostAllgather(comm, line, all.data(), sizeof line) == symcommSuccess ? 0 : 1;
  if (rank == 0) print_static();
  if (rank == 0 && rc == 0) {
    std::printf("\nCommunicator: %d rank(s) on %d node(s)\n", size, nnodes);
    for (int r = 0; r < size; ++r) std::printf("%s\n", &all[sizeof line * static_cast<size_t>(r)]);
  }
  if (symcommFinalize(comm) != symcommSuccess) rc = 1;
  return rc;
}

void print_static() {
  int version = 0;
  symcommGetVersion(&version);
  std::printf("symcomm %d.%d.%d\n\nBuild\n", version / 10000, version / 100 % 100, version % 100);
  const char* info = symcommGetBuildInfo();
  for (const char* p = info; *p;) {
    const char* nl = std::strchr(p, '\n');
    size_t len = nl ? static_cast<size_t>(nl - p) : std::strlen(p);
    std::printf("  %.*s\n", static_cast<int>(len), p);
    p += len + (nl ? 1 : 0);
  }
  print_devices();
  print_params();
  std::printf("\nCollective algorithms (preferred first; the selection table takes the first that "
              "can run a call)\n");
  for (int i = 0; i < symcommCollAlgorithmCount(); ++i)
    std::printf("  %s\n", symcommCollAlgorithmName(i));
  std::printf("\nDecomposition backends (each runs transposes and halo exchanges, as the "
              "config's backend and halo_backend say; preferred first)\n");
  for (int i = 0; i < symcommDecompBackendCount(); ++i)
    std::printf("  %s\n", symcommDecompBackendName(i));
  std::printf("\nCollective selection table\n");
  for (const char* p = symcommCollSelectionTable(); *p;) {
    const char* nl = std::strchr(p, '\n');
    size_t len = nl ? static_cast<size_t>(nl - p) : std::strlen(p);
    std::printf("  %.*s\n", static_cast<int>(len), p);
    p += len + (nl ? 1 : 0);
  }
}

}  // namespace

int main(int argc, char** argv) {
  bool comm = argc > 1 && std::strcmp(argv[1], "--comm") == 0;
  if (argc > 1 && !comm) {
    std::printf("usage: symcomm-info [--comm]\n  --comm  also join a communicator from the "
                "launcher's environment (symrun -n N symcomm-info --comm) and print the node map\n");
    return std::strcmp(argv[1], "-h") == 0 || std::strcmp(argv[1], "--help") == 0 ? 0 : 2;
  }
  if (!comm) {
    print_static();
    return 0;
  }
  return print_comm();
}
