// Joining and leaving a communicator, and what a communicator knows of itself.
#include <sys/socket.h>

#include <chrono>
#include <cstdlib>
#include <cstring>

#include "base/param.h"
#include "bootstrap/launcher_env.h"
#include "bootstrap/root.h"
#include "capi/guard.h"
#include "nccl/nccl_lib.h"

using namespace symcomm;

namespace {

// What a process does once before symcomm starts a thread (a bootstrap root, a peer
// monitor): the environment is changed here, never while those threads read it.
void before_threads() { keep_nccl_safe_once(); }

// A fresh token and a bootstrap root serving it (in a thread of this process) in `mode`.
UniqueId new_unique_id(RootMode mode) {
  before_threads();
  UniqueId u;
  u.token = random_token();
  u.root = start_bootstrap_root(tcp_listen(NetAddr::parse(bootstrap_host(), 0), SOMAXCONN),
                                u.token, mode);
  return u;
}

// Logs how long each step of joining took (SYMCOMM_LOG_LEVEL=info).
class StepTimer {
 public:
  void done(const char* step) {
    auto now = std::chrono::steady_clock::now();
    SYMCOMM_INFO("init: %s took %.1f ms", step,
                 std::chrono::duration<double, std::milli>(now - last_).count());
    last_ = now;
  }

 private:
  std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now();
};

symcommConfig_t checked_config(const symcommConfig_t* config) {
  symcommConfig_t c = SYMCOMM_CONFIG_INITIALIZER;
  if (!config) return c;
  SYMCOMM_REQUIRE(config->magic == SYMCOMM_CONFIG_MAGIC, symcommInvalidArgument,
                  "config was not initialised with symcommConfigInit or "
                  "SYMCOMM_CONFIG_INITIALIZER (magic 0x%08x)", config->magic);
  SYMCOMM_REQUIRE(config->struct_size == sizeof(symcommConfig_t), symcommInvalidArgument,
                  "config->struct_size is %zu, this library's symcommConfig_t has %zu bytes "
                  "(header and library differ?)", config->struct_size, sizeof(symcommConfig_t));
  SYMCOMM_REQUIRE(config->device >= -1, symcommInvalidArgument,
                  "config->device is %d (use -1 for automatic)", config->device);
  return *config;
}

void setup(symcommComm& comm, const symcommConfig_t& config);

std::unique_ptr<symcommComm> create(const UniqueId& uid, int nranks, int rank,
                                    const symcommConfig_t& config) {
  before_threads();
  LogRankScope log_rank(rank);
  auto comm = std::make_unique<symcommComm>();
  StepTimer timer;
  comm->bootstrap = Bootstrap::join(uid, nranks, rank);
  timer.done("bootstrap join");
  try {
    setup(*comm, config);
  } catch (...) {
    // Every rank failed at the same step (each step agrees): leaving is not a lost peer.
    comm->bootstrap->begin_finalize();
    throw;
  }
  return comm;
}

void setup(symcommComm& c, const symcommConfig_t& config) {
  symcommComm* comm = &c;
  Bootstrap& bs = *comm->bootstrap;
  const int rank = bs.rank(), nranks = bs.nranks();
  symcommMemorySpace_t kind = symcommSpaceHost;
  StepTimer timer;
  bs.agree_on([&] { kind = resolve_space(config.space); });  // loads the CUDA driver
  timer.done("memory space (CUDA driver load and cuInit)");
  std::vector<int32_t> kinds(static_cast<size_t>(nranks));
  int32_t mine = kind;
  bs.allgather(&mine, sizeof mine, kinds.data());
  for (int r = 0; r < nranks; ++r)
    SYMCOMM_REQUIRE(kinds[static_cast<size_t>(r)] == mine, symcommInvalidUsage,
                    "ranks disagree on the memory space: this rank (%d) uses %s, rank %d uses "
                    "%s (set SYMCOMM_MEMORY_SPACE alike on every rank)",
                    rank, space_name(kind), r,
                    space_name(static_cast<symcommMemorySpace_t>(kinds[static_cast<size_t>(r)])));
  comm->space_kind = kind;
  comm->topology = discover_topology(bs, kind, config.device);
  timer.done("topology");
  bs.agree_on([&] { comm->space = make_space(kind, comm->topology); });
  timer.done("memory space setup (CUDA context)");
  comm->heap = std::make_unique<Heap>(bs, comm->topology, *comm->space);
  timer.done("heap windows");
  comm->registrations =
      std::make_unique<Registrations>(bs, comm->topology, *comm->space, *comm->heap);
  comm->rma = std::make_unique<Rma>(bs, comm->topology, *comm->heap, *comm->registrations, kind);
  RmaBackend* backend = &comm->rma->backend();
  comm->copies = make_copies(kind, comm->topology, *comm->rma, *comm->heap);
  comm->nccl = std::make_unique<NcclComms>(comm->topology, bs, kind);  // made on first use
  // The mailboxes first: CollContext's closing barrier keeps every peer from sending into them
  // before they were cleared here.
  comm->p2p = std::make_unique<PointToPoint>(comm->topology, *comm->rma, *comm->heap, kind);
  comm->coll = std::make_unique<CollContext>(comm->topology, *comm->heap, *comm->registrations,
                                             *comm->rma, *comm->copies, *comm->nccl, kind);
  CollContext* coll = comm->coll.get();  // its algorithms' states end their waits too
  Transports* transports = &comm->rma->transports();  // and operations on the network
  NcclComms* nccl = comm->nccl.get();  // and NCCL's communicators are aborted
  bs.on_lost([backend, coll, transports, nccl] {
    backend->abort();
    transports->abort();
    coll->abort();
    nccl->abort();
  });
  timer.done("one-sided communication and collectives");
  SYMCOMM_INFO("rank %d of %d joined: node %d of %d, local rank %d of %d, %s space, device %d",
               rank, nranks, comm->topology.node, comm->topology.nnodes,
               comm->topology.local_rank, comm->topology.local_size, space_name(kind),
               comm->topology.device);
}

void check_ranks(int nranks, int rank) {
  SYMCOMM_REQUIRE(nranks >= 1, symcommInvalidArgument, "nranks is %d, must be at least 1",
                  nranks);
  SYMCOMM_REQUIRE(rank >= 0 && rank < nranks, symcommInvalidArgument,
                  "rank %d is out of range [0, %d)", rank, nranks);
}

}  // namespace

extern "C" symcommResult_t symcommConfigInit(symcommConfig_t* config) {
  return guarded([] { return std::string("symcommConfigInit"); }, [&] {
    SYMCOMM_REQUIRE_ARG(config);
    *config = SYMCOMM_CONFIG_INITIALIZER;
  });
}

extern "C" symcommResult_t symcommGetUniqueId(symcommUniqueId* uid) {
  return guarded([] { return std::string("symcommGetUniqueId"); }, [&] {
    SYMCOMM_REQUIRE_ARG(uid);
    *uid = new_unique_id(RootMode::Once).encode();
  });
}

// For symrun alone, declared there (no public header): like symcommGetUniqueId, but the root
// serves one join after another for the process's lifetime (a program may finalize and
// initialize again), each bounded by SYMCOMM_BOOTSTRAP_TIMEOUT from its first rank only (a
// program may take its time before it joins).
extern "C" __attribute__((visibility("default"))) symcommResult_t symcommLauncherUniqueId(
    symcommUniqueId* uid) {
  return guarded([] { return std::string("symcommLauncherUniqueId"); }, [&] {
    SYMCOMM_REQUIRE_ARG(uid);
    *uid = new_unique_id(RootMode::Serial).encode();
  });
}

extern "C" symcommResult_t symcommUniqueIdToString(const symcommUniqueId* uid, char* buf,
                                                   size_t buflen) {
  return guarded([&] { return format("symcommUniqueIdToString(buflen=%zu)", buflen); }, [&] {
    SYMCOMM_REQUIRE_ARG(uid);
    SYMCOMM_REQUIRE_ARG(buf);
    SYMCOMM_REQUIRE(buflen >= SYMCOMM_UNIQUE_ID_STRING_BYTES, symcommInvalidArgument,
                    "buflen %zu is less than SYMCOMM_UNIQUE_ID_STRING_BYTES (%d)", buflen,
                    SYMCOMM_UNIQUE_ID_STRING_BYTES);
    std::string hex = to_hex(uid->internal, sizeof uid->internal);
    std::memcpy(buf, hex.c_str(), hex.size() + 1);
  });
}

extern "C" symcommResult_t symcommUniqueIdFromString(const char* text, symcommUniqueId* uid) {
  return guarded([] { return std::string("symcommUniqueIdFromString"); }, [&] {
    SYMCOMM_REQUIRE_ARG(text);
    SYMCOMM_REQUIRE_ARG(uid);
    symcommUniqueId raw;
    SYMCOMM_REQUIRE(from_hex(text, raw.internal, sizeof raw.internal), symcommInvalidArgument,
                    "text is not %d hex digits", 2 * SYMCOMM_UNIQUE_ID_BYTES);
    UniqueId::decode(raw);  // validates
    *uid = raw;
  });
}

extern "C" symcommResult_t symcommInit(symcommComm_t* comm, int nranks, int rank,
                                       const symcommUniqueId* uid,
                                       const symcommConfig_t* config) {
  return guarded([&] { return format("symcommInit(nranks=%d, rank=%d)", nranks, rank); }, [&] {
    SYMCOMM_REQUIRE_ARG(comm);
    *comm = nullptr;
    validate_all();  // before anything is joined: every rank refuses alike
    SYMCOMM_REQUIRE_ARG(uid);
    check_ranks(nranks, rank);
    symcommConfig_t c = checked_config(config);
    *comm = create(UniqueId::decode(*uid), nranks, rank, c).release();
  });
}

extern "C" symcommResult_t symcommInitFromEnv(symcommComm_t* comm,
                                              const symcommConfig_t* config) {
  return guarded([] { return std::string("symcommInitFromEnv"); }, [&] {
    SYMCOMM_REQUIRE_ARG(comm);
    *comm = nullptr;
    validate_all();  // before anything is joined: every rank refuses alike
    before_threads();
    symcommConfig_t c = checked_config(config);
    LaunchEnv env = read_launch_env();
    UniqueId uid;
    if (env.uid) {
      uid = *env.uid;
    } else {
      uid.root = *env.root;
      uid.token = env.token;
      uid.root_ports = env.root_ports;
      if (env.rank == 0) {
        // MASTER_ADDR (or the root's host name) is how the others reach rank 0, and may
        // resolve here to an address they cannot reach (127.0.1.1 for the host's own name on
        // many distributions): the root listens on every address of the family, on that port.
        // Where SYMCOMM_BOOTSTRAP_ADDR is set, sockets bind only the addresses named: the root
        // binds the root address itself, as it always did.
        NetAddr bind_addr = *env.root;
        if (!bootstrap_addr_configured())
          std::memset(bind_addr.addr, 0, sizeof bind_addr.addr);  // INADDR_ANY, in6addr_any
        // The first free one of the root's ports (LaunchEnv::root_ports); the last is bound
        // with tcp_listen, whose error then names it.
        Fd listener;
        for (int k = 0; k < env.root_ports && !listener; ++k) {
          NetAddr at = bind_addr;
          at.port = static_cast<uint16_t>(bind_addr.port + k);
          listener = k + 1 < env.root_ports ? tcp_listen_if_free(at, SOMAXCONN)
                                            : tcp_listen(at, SOMAXCONN);
          if (!listener)
            SYMCOMM_DEBUG("bootstrap root: port %d is taken, trying the next", at.port);
        }
        start_bootstrap_root(std::move(listener), env.token);
      }
    }
    *comm = create(uid, env.nranks, env.rank, c).release();
  });
}

extern "C" symcommResult_t symcommFinalize(symcommComm_t comm) {
  return guarded([] { return std::string("symcommFinalize"); }, [&] {
    symcommComm& c = checked(comm);
    symcommResult_t code = symcommSuccess;
    std::string message;
    {
      // Torn down however this ends; the handle itself is kept (symcommComm::tear_down).
      struct TearDown {
        symcommComm& c;
        ~TearDown() { c.tear_down(); }
      } tear_down{c};
      for (auto& [object, detach] : c.dependents) detach();
      c.dependents.clear();
      c.bootstrap->begin_finalize();
      try {
        // Nobody unmaps memory that a peer may still be using.
        c.bootstrap->barrier();
      } catch (const Error& e) {
        code = e.code();
        message = e.what();
      }
    }
    if (code != symcommSuccess)
      throw Error(code, "freed everything, but the last barrier failed: " + message);
  });
}

extern "C" symcommResult_t symcommCommAbort(symcommComm_t comm) {
  return guarded([] { return std::string("symcommCommAbort"); }, [&] {
    symcommComm& c = checked(comm);
    // fail() runs the waits' ends (the on_lost callbacks) and shuts the liveness connections:
    // the peers lose this rank at once. A second abort, or one after a lost rank, adds
    // nothing.
    c.bootstrap->fail(symcommInvalidUsage,
                      format("the communicator was aborted on rank %d (symcommCommAbort)",
                             c.topology.rank));
  });
}

extern "C" symcommResult_t symcommCommGetAsyncError(symcommComm_t comm, symcommResult_t* result) {
  return guarded([] { return std::string("symcommCommGetAsyncError"); }, [&] {
    symcommComm& c = checked(comm);
    SYMCOMM_REQUIRE_ARG(result);
    std::string why;
    symcommResult_t code = c.bootstrap->failure(&why);
    if (code == symcommSuccess) {
      code = c.rma->backend().pending_error();
      if (code != symcommSuccess)
        why = format("a kernel's device call recorded %s (the next call on the communicator "
                     "reports it)", symcommGetErrorString(code));
    }
    *result = code;
    if (code != symcommSuccess) set_last_error(why);
  });
}

#define SYMCOMM_GETTER(fn, type, arg, expr)                                  \
  extern "C" symcommResult_t fn(symcommComm_t comm, type* arg) {            \
    return guarded([] { return std::string(#fn); }, [&] {                   \
      symcommComm& c = checked(comm);                                        \
      SYMCOMM_REQUIRE_ARG(arg);                                              \
      *arg = (expr);                                                         \
    });                                                                      \
  }

SYMCOMM_GETTER(symcommCommRank, int, rank, c.topology.rank)
SYMCOMM_GETTER(symcommCommSize, int, nranks, c.topology.nranks)
SYMCOMM_GETTER(symcommCommLocalRank, int, local_rank, c.topology.local_rank)
SYMCOMM_GETTER(symcommCommLocalSize, int, local_size, c.topology.local_size)
SYMCOMM_GETTER(symcommCommMemorySpace, symcommMemorySpace_t, space, c.space_kind)
SYMCOMM_GETTER(symcommCommDevice, int, device, c.topology.device)
#undef SYMCOMM_GETTER

extern "C" symcommResult_t symcommCommNode(symcommComm_t comm, int* node, int* nnodes) {
  return guarded([] { return std::string("symcommCommNode"); }, [&] {
    symcommComm& c = checked(comm);
    SYMCOMM_REQUIRE_ARG(node);
    SYMCOMM_REQUIRE_ARG(nnodes);
    *node = c.topology.node;
    *nnodes = c.topology.nnodes;
  });
}

extern "C" symcommResult_t symcommPeerAccessible(symcommComm_t comm, int pe, int* accessible) {
  return guarded([&] { return format("symcommPeerAccessible(pe=%d)", pe); }, [&] {
    symcommComm& c = checked(comm);
    SYMCOMM_REQUIRE_ARG(accessible);
    SYMCOMM_REQUIRE(pe >= 0 && pe < c.topology.nranks, symcommInvalidArgument,
                    "pe %d is out of range [0, %d)", pe, c.topology.nranks);
    *accessible = c.topology.accessible[static_cast<size_t>(pe)];
  });
}

extern "C" symcommResult_t symcommPeerTransport(symcommComm_t comm, int pe, const char** name) {
  return guarded([&] { return format("symcommPeerTransport(pe=%d)", pe); }, [&] {
    symcommComm& c = checked(comm);
    SYMCOMM_REQUIRE_ARG(name);
    SYMCOMM_REQUIRE(pe >= 0 && pe < c.topology.nranks, symcommInvalidArgument,
                    "pe %d is out of range [0, %d)", pe, c.topology.nranks);
    *name = c.rma->transports().name_of(pe);
  });
}

extern "C" symcommResult_t symcommPeerNetLanes(symcommComm_t comm, int pe, symcommNetLane_t* lanes,
                                               int max, int* count) {
  return guarded([&] { return format("symcommPeerNetLanes(pe=%d, max=%d)", pe, max); }, [&] {
    symcommComm& c = checked(comm);
    SYMCOMM_REQUIRE_ARG(count);
    SYMCOMM_REQUIRE(pe >= 0 && pe < c.topology.nranks, symcommInvalidArgument,
                    "pe %d is out of range [0, %d)", pe, c.topology.nranks);
    SYMCOMM_REQUIRE(max >= 0 && (max == 0 || lanes), symcommInvalidArgument,
                    "max %d lanes into %p", max, static_cast<void*>(lanes));
    const Transports& t = c.rma->transports();
    std::vector<symcommNetLane_t> all;
    if (t.connected(pe)) all = t.to(pe).net_lanes(pe);
    for (size_t i = 0; i < all.size() && static_cast<int>(i) < max; ++i) lanes[i] = all[i];
    *count = static_cast<int>(all.size());
  });
}
