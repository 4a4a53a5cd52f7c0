// symcomm-info: what needs no communicator. The version and build options, the CUDA driver
// and devices (loaded at run time, as the library does), the network transport's libfabric,
// the parameters, the registered collective algorithms and decomposition backends, and the
// selection table's rows.
#include <cuda.h>
#include <dlfcn.h>

#include <cstring>
#include <string>

#include "info.h"
#include "symcomm/decomp.h"
#include "symcomm/fused.h"
#include "symcomm/symcomm.h"

namespace symcomm_info {
namespace {

using GetProc = CUresult (*)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*);

template <typename F>
F lookup(GetProc get, const char* name) {
  void* p = nullptr;
  CUdriverProcAddressQueryResult status;
  if (get(name, &p, CUDA_VERSION, CU_GET_PROC_ADDRESS_DEFAULT, &status) != CUDA_SUCCESS) return nullptr;
  return reinterpret_cast<F>(p);
}

void collect_devices(Devices* out) {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    out->unavailable = std::string("no CUDA driver (") + dlerror() + ")";
    return;
  }
  auto get = reinterpret_cast<GetProc>(dlsym(lib, "cuGetProcAddress_v2"));
  auto init = get ? lookup<decltype(&cuInit)>(get, "cuInit") : nullptr;
  if (!init || init(0) != CUDA_SUCCESS) {
    out->unavailable = "the CUDA driver did not initialise";
    return;
  }
  auto version = lookup<decltype(&cuDriverGetVersion)>(get, "cuDriverGetVersion");
  auto count_fn = lookup<decltype(&cuDeviceGetCount)>(get, "cuDeviceGetCount");
  auto device = lookup<decltype(&cuDeviceGet)>(get, "cuDeviceGet");
  auto name_fn = lookup<decltype(&cuDeviceGetName)>(get, "cuDeviceGetName");
  auto attr = lookup<decltype(&cuDeviceGetAttribute)>(get, "cuDeviceGetAttribute");
  auto mem = lookup<decltype(&cuDeviceTotalMem)>(get, "cuDeviceTotalMem");
  auto peer = lookup<decltype(&cuDeviceCanAccessPeer)>(get, "cuDeviceCanAccessPeer");
  int n = 0;
  version(&out->driver_version);
  count_fn(&n);
  for (int i = 0; i < n; ++i) {
    CUdevice d;
    device(&d, i);
    Device dev;
    dev.index = i;
    char name[128] = "?";
    name_fn(name, sizeof name, d);
    dev.name = name;
    size_t bytes = 0;
    mem(&bytes, d);
    dev.gib = static_cast<double>(bytes) / 1073741824.0;
    attr(&dev.major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, d);
    attr(&dev.minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, d);
    attr(&dev.sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, d);
    attr(&dev.vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, d);
    attr(&dev.fd_handles, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, d);
    attr(&dev.fabric_handles, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED, d);
    attr(&dev.copy_engines, CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT, d);
    out->list.push_back(dev);
  }
  out->peer_access.assign(static_cast<size_t>(n), std::vector<bool>(static_cast<size_t>(n), true));
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) {
      int ok = 1;
      CUdevice a, b;
      device(&a, i);
      device(&b, j);
      if (i != j) peer(&ok, a, b);
      out->peer_access[static_cast<size_t>(i)][static_cast<size_t>(j)] = ok != 0;
    }
  }
}

void collect_net(Net* out) {
  symcommNetInfo_t n;
  if (symcommGetNetInfo(&n) != symcommSuccess) {
    out->unavailable = symcommGetLastError();
    return;
  }
  if (!n.available) {
    out->unavailable = n.unavailable;
    return;
  }
  out->version = n.version;
  out->not_selected = n.not_selected;
  for (int i = 0; i < n.choice_count; ++i)
    out->choices.push_back({n.choices[i].provider, n.choices[i].domain, n.choices[i].fabric,
                            i == n.selected});
  for (int i = 0; i < n.rail_count; ++i)
    out->rails.push_back(
        {n.rails[i].domain, n.rails[i].provider, n.rails[i].fabric, n.rails[i].why_not});
}

// Splits text into its lines.
std::vector<std::string> lines_of(const char* text) {
  std::vector<std::string> lines;
  for (const char* p = text; *p;) {
    const char* nl = std::strchr(p, '\n');
    size_t len = nl ? static_cast<size_t>(nl - p) : std::strlen(p);
    lines.emplace_back(p, len);
    p += len + (nl ? 1 : 0);
  }
  return lines;
}

// A row of the table reads "OP, teams ..., SIZE[, symmetric buffers]: ALGORITHM (SOURCE)".
SelectionRow parse_row(const std::string& line) {
  SelectionRow row;
  row.text = line;
  const size_t comma = line.find(", teams ");
  const size_t colon = line.find(": ");
  if (comma == std::string::npos || colon == std::string::npos || colon < comma) return row;
  row.op = line.substr(0, comma);
  const size_t paren = line.find(" (", colon);
  row.algorithm = line.substr(colon + 2, paren == std::string::npos ? paren : paren - colon - 2);
  return row;
}

std::vector<std::string> ops_of(unsigned bits) {
  std::vector<std::string> out;
  for (unsigned op = 0; op < kOpCount; ++op)
    if (bits & (1u << op)) out.emplace_back(kOps[op]);
  return out;
}

std::vector<std::string> spaces_of(unsigned bits) {
  std::vector<std::string> out;
  if (bits & (1u << symcommSpaceCuda)) out.emplace_back("cuda");
  if (bits & (1u << symcommSpaceHost)) out.emplace_back("host");
  return out;
}

Declared declared(const symcommCollAlgorithmInfo_t& a) {
  Declared d;
  d.summary = a.summary;
  d.library = a.library ? a.library : "";
  d.ops = ops_of(a.ops);
  d.spaces = spaces_of(a.spaces);
  d.device_counts = spaces_of(a.device_counts);
  d.uncapturable = ops_of(a.uncapturable_ops);
  d.max_team = a.max_team;
  d.in_place_recv = a.in_place_recv != 0;
  d.load_store = a.load_store != 0;
  d.counters = a.counters != 0;
  d.across_nodes = a.across_nodes != 0;
  return d;
}

}  // namespace

void collect_static(Info* info) {
  symcommGetVersion(&info->version);
  for (const std::string& line : lines_of(symcommGetBuildInfo())) {
    const size_t eq = line.find('=');
    info->build.emplace_back(line.substr(0, eq), eq == std::string::npos ? "" : line.substr(eq + 1));
  }
  collect_devices(&info->devices);
  collect_net(&info->net);
  for (int i = 0; i < symcommGetParamCount(); ++i) {
    symcommParamInfo_t p;
    if (symcommGetParam(i, &p) != symcommSuccess) continue;
    info->params.push_back({p.name, p.type, p.value, p.default_value, p.description, p.is_set != 0});
  }
  for (int i = 0; i < symcommCollAlgorithmCount(); ++i) {
    symcommCollAlgorithmInfo_t a;
    if (symcommGetCollAlgorithmInfo(i, &a) != symcommSuccess) continue;
    info->algorithms.push_back({a.name, declared(a), {}});
  }
  for (int i = 0; i < symcommDecompBackendCount(); ++i)
    info->backends.emplace_back(symcommDecompBackendName(i));
  for (int i = 0; i < symcommFusedImplementationCount(); ++i)
    info->fused.emplace_back(symcommFusedImplementationName(i));
  for (const std::string& line : lines_of(symcommCollSelectionTable()))
    info->selection.push_back(parse_row(line));
}

}  // namespace symcomm_info
