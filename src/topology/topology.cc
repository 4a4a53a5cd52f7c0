#include "topology/topology.h"

#include <climits>
#include <cstring>
#include <string>

#include "base/cuda_driver.h"
#include "base/log.h"
#include "base/param.h"

namespace symcomm {

static const IntParam kDevice("SYMCOMM_DEVICE", "-1",
                              "CUDA device of this rank (-1: local rank modulo device count)",
                              -1, INT_MAX);

namespace {

void group_nodes(const Bootstrap& bs, Topology& t) {
  const auto& peers = bs.peers();
  std::vector<std::string> keys;
  t.node_of.assign(peers.size(), -1);
  for (size_t r = 0; r < peers.size(); ++r) {
    std::string key = std::string(peers[r].hostname) + "/" + peers[r].boot_id;
    size_t n = 0;
    while (n < keys.size() && keys[n] != key) ++n;
    if (n == keys.size()) keys.push_back(key);
    t.node_of[r] = static_cast<int>(n);
  }
  t.nnodes = static_cast<int>(keys.size());
  t.node = t.node_of[static_cast<size_t>(t.rank)];
  for (int r = 0; r < t.nranks; ++r)
    if (t.node_of[static_cast<size_t>(r)] == t.node) {
      if (r == t.rank) t.local_rank = static_cast<int>(t.local_ranks.size());
      t.local_ranks.push_back(r);
    }
  t.local_size = static_cast<int>(t.local_ranks.size());
}

int pick_device(const CudaDriver& drv, int requested, int local_rank) {
  int count = 0;
  SYMCOMM_CU(drv, cuDeviceGetCount(&count));
  SYMCOMM_REQUIRE(count > 0, symcommNotSupported, "the cuda space needs a GPU; none is visible");
  int dev = requested >= 0 ? requested : static_cast<int>(kDevice.get());
  if (dev < 0) dev = local_rank % count;
  SYMCOMM_REQUIRE(dev < count, symcommInvalidArgument,
                  "device %d does not exist (%d visible; check SYMCOMM_DEVICE, the config's "
                  "device and CUDA_VISIBLE_DEVICES)", dev, count);
  return dev;
}

void cuda_access(Bootstrap& bs, Topology& t, int requested) {
  CUdevice me = 0;
  CUuuid uuid{};
  bs.agree_on([&] {
    const CudaDriver& drv = cuda_driver();
    t.device = pick_device(drv, requested, t.local_rank);
    SYMCOMM_CU(drv, cuDeviceGet(&me, t.device));
    SYMCOMM_CU(drv, cuDeviceGetUuid(&uuid, me));
  });
  const CudaDriver& drv = cuda_driver();
  std::vector<CUuuid> all(static_cast<size_t>(t.nranks));
  bs.allgather(&uuid, sizeof uuid, all.data());
  for (int pe = 0; pe < t.nranks; ++pe)  // GPU uuids are unique across machines
    for (int q = 0; q < pe; ++q)
      if (std::memcmp(&all[static_cast<size_t>(q)], &all[static_cast<size_t>(pe)], sizeof(CUuuid)) == 0) {
        t.gpu_owner[static_cast<size_t>(pe)] = q;
        break;
      }
  int count = 0;
  SYMCOMM_CU(drv, cuDeviceGetCount(&count));
  for (int pe = 0; pe < t.nranks; ++pe) {
    if (!t.same_node(pe)) continue;
    const CUuuid& want = all[static_cast<size_t>(pe)];
    int visible = -1;
    for (int d = 0; d < count && visible < 0; ++d) {
      CUdevice dev;
      CUuuid u;
      SYMCOMM_CU(drv, cuDeviceGet(&dev, d));
      SYMCOMM_CU(drv, cuDeviceGetUuid(&u, dev));
      if (std::memcmp(&u, &want, sizeof u) == 0) visible = d;
    }
    int ok = 1;
    if (visible >= 0 && visible != t.device) {
      CUdevice peer;
      SYMCOMM_CU(drv, cuDeviceGet(&peer, visible));
      SYMCOMM_CU(drv, cuDeviceCanAccessPeer(&ok, me, peer));
    } else if (visible < 0) {
      SYMCOMM_DEBUG("rank %d's GPU is not visible here; assuming P2P access", pe);
    }
    t.accessible[static_cast<size_t>(pe)] = static_cast<char>(ok != 0);
    if (pe != t.rank && visible == t.device)
      SYMCOMM_WARN("ranks %d and %d share GPU %d: without MPS, kernels that wait for each "
                   "other (device waits, on-stream waits and barriers) can hold the GPU from "
                   "the other process and stall until SYMCOMM_WAIT_TIMEOUT; use one GPU per rank",
                   t.rank, pe, t.device);
  }
}

}  // namespace

std::string Topology::why_inaccessible(int pe) const {
  if (accessible[static_cast<size_t>(pe)]) return "";
  if (!same_node(pe))
    return format("rank %d is on node %d and rank %d on node %d: ranks on other nodes are not "
                  "load/store accessible (SYMCOMM_NODE_NAME or the host tells the nodes apart)",
                  pe, node_of[static_cast<size_t>(pe)], rank, node);
  return format("rank %d's GPU and this rank's GPU %d cannot access each other peer to peer "
                "(cuDeviceCanAccessPeer: no NVLink or PCIe P2P path)", pe, device);
}

Topology discover_topology(Bootstrap& bs, symcommMemorySpace_t space, int requested) {
  Topology t;
  t.rank = bs.rank();
  t.nranks = bs.nranks();
  group_nodes(bs, t);
  t.accessible.assign(static_cast<size_t>(t.nranks), 0);
  t.gpu_owner.resize(static_cast<size_t>(t.nranks));
  for (int pe = 0; pe < t.nranks; ++pe) t.gpu_owner[static_cast<size_t>(pe)] = pe;
  if (space == symcommSpaceCuda) {
    cuda_access(bs, t, requested);
  } else {
    for (int pe : t.local_ranks) t.accessible[static_cast<size_t>(pe)] = 1;
  }
  t.accessible[static_cast<size_t>(t.rank)] = 1;
  return t;
}

}  // namespace symcomm
