// Probe (built with -DSYMCOMM_BUILD_PROBES=ON into build/probe/; or nvcc fi_hmem.cu
// -l:libfabric.so.1 with libfabric's headers): does this machine's libfabric reach CUDA memory
// (FI_HMEM)? For each provider: fi_getinfo asking for FI_RMA | FI_MSG | FI_HMEM, and where a
// provider answers, fi_mr_regattr of cudaMalloc memory with FI_HMEM_CUDA. Where none can, the
// net transport stages GPU memory through pinned host memory (docs/transport.md).
#include <cstdio>
#include <cstring>
#include <cuda_runtime.h>
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <sys/uio.h>
int main() {
  void* d = nullptr;
  if (cudaMalloc(&d, 1 << 20) != cudaSuccess) { std::printf("cudaMalloc failed\n"); return 1; }
  const char* provs[] = {"shm", "tcp", "sockets", "udp"};
  for (const char* prov : provs) {
    fi_info* hints = fi_allocinfo();
    hints->caps = FI_RMA | FI_MSG | FI_HMEM;
    hints->ep_attr->type = FI_EP_RDM;
    hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_HMEM | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_ENDPOINT;
    hints->fabric_attr->prov_name = strdup(prov);
    fi_info* info = nullptr;
    int rc = fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, hints, &info);
    std::printf("%s: getinfo(FI_HMEM) rc=%d %s\n", prov, rc, rc ? fi_strerror(-rc) : "");
    if (rc == 0) {
      fid_fabric* fab = nullptr; fid_domain* dom = nullptr;
      rc = fi_fabric(info->fabric_attr, &fab, nullptr);
      if (!rc) rc = fi_domain(fab, info, &dom, nullptr);
      std::printf("  fabric/domain rc=%d\n", rc);
      if (!rc) {
        iovec iov{d, 1 << 20};
        fi_mr_attr attr{};
        attr.mr_iov = &iov; attr.iov_count = 1; attr.access = FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
        attr.iface = FI_HMEM_CUDA; attr.device.cuda = 0;
        fid_mr* mr = nullptr;
        rc = fi_mr_regattr(dom, &attr, 0, &mr);
        std::printf("  fi_mr_regattr(cudaMalloc memory, FI_HMEM_CUDA) rc=%d %s\n", rc, rc ? fi_strerror(-rc) : "ok");
        if (mr) fi_close(&mr->fid);
        fi_close(&dom->fid);
      }
      if (fab) fi_close(&fab->fid);
      fi_freeinfo(info);
    }
    fi_freeinfo(hints);
  }
  return 0;
}
