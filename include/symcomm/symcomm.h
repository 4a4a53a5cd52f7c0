/*
 * symcomm: symmetric-memory communication between GPUs (and between CPU processes).
 *
 * Every rank of a communicator allocates the same symmetric heap; every rank can address
 * the heap of every load/store-accessible peer. This header is the C host API: result codes,
 * version and parameters, joining a communicator, host-side collectives over the bootstrap
 * network, the symmetric heap and registered buffers, teams, one-sided communication on a
 * stream; it includes the collectives on a stream (symcomm/coll.h). Beside it: the pencil
 * decomposition
 * (symcomm/decomp.h), the device API (symcomm/device_comm.h for the handle,
 * symcomm/device.cuh for the calls in kernels) and joining from MPI (symcomm/symcomm_mpi.h).
 *
 * Error policy: every function returns a symcommResult_t (or, for the few that return a
 * pointer, NULL on failure). On failure, symcommGetLastError() returns a message for the
 * calling thread that names the call, the argument and the offending value. The library
 * never exits, aborts, or writes to stdout; diagnostics go to stderr according to
 * SYMCOMM_LOG_LEVEL.
 *
 * Thread safety: a communicator may be used by one thread at a time. Different
 * communicators may be used concurrently from different threads. Their GPU work shares the
 * GPU: collectives whose kernels wait for their peers need their grids resident, so large
 * ones of different communicators should not run at once on one GPU (order them on one
 * stream or with events, the same on every rank; docs/coll.md, "Rules and limits"). Making a
 * communicator in the cuda space loads every kernel of the library: CUDA's lazy loading
 * (CUDA_MODULE_LOADING=LAZY, the default) would load each at its first launch, which may wait
 * for every kernel on the GPU, other communicators' kernels waiting for their peers
 * included. Load your own kernels that run beside communicator work the same way (one
 * cudaFuncGetAttributes each, before) or set CUDA_MODULE_LOADING=EAGER.
 */
#ifndef SYMCOMM_SYMCOMM_H_
#define SYMCOMM_SYMCOMM_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif
#pragma GCC visibility push(default)

#define SYMCOMM_VERSION_MAJOR 0
#define SYMCOMM_VERSION_MINOR 1
#define SYMCOMM_VERSION_PATCH 0
#define SYMCOMM_VERSION_CODE \
  (SYMCOMM_VERSION_MAJOR * 10000 + SYMCOMM_VERSION_MINOR * 100 + SYMCOMM_VERSION_PATCH)

/* ------------------------------------------------------------------------------------ */
/* Result codes                                                                         */
/* ------------------------------------------------------------------------------------ */
typedef enum {
  symcommSuccess = 0,
  symcommInvalidArgument = 1, /* a bad argument: null pointer, out-of-range value, ...  */
  symcommInvalidUsage = 2,    /* a call that does not fit the state: double free, ranks */
                              /* that disagree on a collective call's arguments, ...    */
  symcommSystemError = 3,     /* a system call failed (socket, mmap, memfd, ...)         */
  symcommCudaError = 4,       /* a CUDA driver or runtime call failed                    */
  symcommOutOfMemory = 5,     /* the heap's maximum or the device's memory is exhausted  */
  symcommTimeout = 6,         /* a bounded wait expired (bootstrap, device wait, ...)    */
  symcommPeerLost = 7,        /* another rank died or stopped answering                  */
  symcommRemoteError = 8,     /* another rank failed in a collective call                */
  symcommNotSupported = 9,    /* the build, the device or the memory space lacks it      */
  symcommInternalError = 10,  /* a bug in symcomm: please report it                      */
  symcommNumResults = 11
} symcommResult_t;

/* A static string naming the code ("symcommTimeout: a bounded wait expired"). */
const char* symcommGetErrorString(symcommResult_t result);

/* The message of the last failed call made by this thread ("" if none yet). Successful
 * calls leave it alone. The string stays valid until the thread's next failed call. */
const char* symcommGetLastError(void);

/* ------------------------------------------------------------------------------------ */
/* Version and parameters                                                               */
/* ------------------------------------------------------------------------------------ */
/* SYMCOMM_VERSION_CODE of the library actually loaded. */
symcommResult_t symcommGetVersion(int* version);

/* Every tunable of symcomm is an environment parameter (SYMCOMM_*) in one typed registry.
 * These calls enumerate it; `symcomm-info` prints it. Strings are owned by the library and
 * stay valid until the next symcommGetParam call from any thread. Each parameter has its
 * valid values (an integer's or a size's range, a duration's minimum; 0 is no bound for
 * every timeout): symcommInit and symcommInitFromEnv check every one before joining and
 * fail with symcommInvalidArgument naming each bad parameter and its value. */
typedef struct {
  const char* name;          /* "SYMCOMM_LOG_LEVEL"                                 */
  const char* type;          /* "int", "size", "bool", "seconds", "string", "enum"   */
  const char* default_value; /* as text                                              */
  const char* value;         /* the value in force now (from the environment or default) */
  const char* description;   /* one line                                             */
  int is_set;                /* 1 if the environment sets it                         */
} symcommParamInfo_t;

int symcommGetParamCount(void);
symcommResult_t symcommGetParam(int index, symcommParamInfo_t* info);

/* Build options as "key=value" lines ("cuda=13.0\nmpi=OFF\n..."), static string. */
const char* symcommGetBuildInfo(void);

/* The network transport, which reaches peers on other nodes through libfabric (loaded at run
 * time from SYMCOMM_FABRIC_LIBRARY): whether libfabric loads, and the providers and domains
 * that offer what the transport needs (a reliable-datagram endpoint, FI_EP_RDM, with
 * messages and RMA). `symcomm-info` prints it. Strings and the array are owned by the
 * library and stay valid until the next symcommGetNetInfo call from any thread. Local: no
 * communicator needed; libfabric not loading is an answer (available 0), not a failure. */
typedef struct {
  const char* provider; /* libfabric's name for it ("tcp;ofi_rxm")                        */
  const char* domain;   /* its domain: for tcp, the network interface ("lo", "eth0")       */
  const char* fabric;   /* its fabric: for tcp, the interface's network ("127.0.0.1/32")   */
} symcommNetChoice_t;

/* A rail that SYMCOMM_NET_RAILS names (the first SYMCOMM_NET_MAX_RAILS of them). */
typedef struct {
  const char* domain;   /* as SYMCOMM_NET_RAILS names it ("rail0")                          */
  const char* provider; /* what a communicator opens there, with SYMCOMM_NET_PROVIDER;     */
  const char* fabric;   /*   both "" where nothing fits                                     */
  const char* why_not;  /* why nothing fits there ("" where something does)                 */
} symcommNetRail_t;

typedef struct {
  int available;               /* 1 where libfabric loads (1.10 or later)                 */
  const char* version;         /* libfabric's version ("1.17"); "" where it does not load  */
  const char* unavailable;     /* why it does not, naming the library tried; "" where it does */
  int choice_count;            /* the providers and domains that offer what it needs      */
  const symcommNetChoice_t* choices; /* in libfabric's order of preference                */
  int selected;                /* index of the one a communicator opens: the first that
                                  SYMCOMM_NET_PROVIDER and SYMCOMM_NET_DOMAIN accept; -1
                                  where none does                                          */
  const char* not_selected;    /* why none does ("" where one does)                        */
  int rail_count;              /* the rails SYMCOMM_NET_RAILS names; 0 where it is not set */
  const symcommNetRail_t* rails;
} symcommNetInfo_t;
symcommResult_t symcommGetNetInfo(symcommNetInfo_t* info);

/* ------------------------------------------------------------------------------------ */
/* Joining a communicator                                                               */
/* ------------------------------------------------------------------------------------ */
#define SYMCOMM_UNIQUE_ID_BYTES 128
/* Opaque: the bootstrap root's address and port and a random 128-bit token. Created by one
 * process with symcommGetUniqueId, passed to every rank by any means (MPI_Bcast, a file, an
 * environment variable via symcommUniqueIdToString), used for one symcommInit. */
typedef struct {
  char internal[SYMCOMM_UNIQUE_ID_BYTES];
} symcommUniqueId;

/* Length of the text form of a unique id, including the terminating NUL. */
#define SYMCOMM_UNIQUE_ID_STRING_BYTES (2 * SYMCOMM_UNIQUE_ID_BYTES + 1)

/* Creates a unique id and starts the bootstrap root in a thread of the calling process.
 * The root serves exactly one symcommInit (of any number of ranks) and then stops; it
 * stops with a timeout error sent to the ranks that did join if the others do not join
 * within SYMCOMM_BOOTSTRAP_TIMEOUT (read here: a bad value fails the call; 0, no bound: the
 * root waits for them without bound). The calling process need not be a rank. The root binds
 * SYMCOMM_BOOTSTRAP_ADDR (default: the first non-loopback IPv4 interface, else loopback). */
symcommResult_t symcommGetUniqueId(symcommUniqueId* uid);

/* Text form (hex) of a unique id, for environment variables and command lines. */
symcommResult_t symcommUniqueIdToString(const symcommUniqueId* uid, char* buf, size_t buflen);
symcommResult_t symcommUniqueIdFromString(const char* text, symcommUniqueId* uid);

typedef struct symcommComm* symcommComm_t;

typedef enum {
  symcommSpaceAuto = 0, /* cuda when a CUDA driver and a GPU are present, else host */
  symcommSpaceCuda = 1, /* GPU memory, one GPU per rank                              */
  symcommSpaceHost = 2  /* CPU memory shared between the processes of a node         */
} symcommMemorySpace_t;

/* Options of symcommInit. Initialise with symcommConfigInit (or SYMCOMM_CONFIG_INITIALIZER)
 * and change what you need; fields left at their initial values defer to the parameters
 * (SYMCOMM_MEMORY_SPACE, SYMCOMM_DEVICE). */
typedef struct {
  size_t struct_size;         /* sizeof(symcommConfig_t): lets the library check the ABI */
  uint32_t magic;             /* set by symcommConfigInit                                */
  symcommMemorySpace_t space; /* symcommSpaceAuto: from SYMCOMM_MEMORY_SPACE            */
  int device;                 /* -1: from SYMCOMM_DEVICE, else local rank % device count */
} symcommConfig_t;

#define SYMCOMM_CONFIG_MAGIC 0x53594d43u /* "SYMC" */
#define SYMCOMM_CONFIG_INITIALIZER \
  { sizeof(symcommConfig_t), SYMCOMM_CONFIG_MAGIC, symcommSpaceAuto, -1 }

symcommResult_t symcommConfigInit(symcommConfig_t* config);

/* Collective over `nranks` processes: joins the communicator described by `uid`. `config`
 * may be NULL. Fails with symcommTimeout if not every rank joins within
 * SYMCOMM_BOOTSTRAP_TIMEOUT, with symcommInvalidArgument if ranks disagree on nranks or two
 * ranks claim the same rank, or before joining if a parameter has a bad value (every rank
 * alike, as all get the same environment), and never hangs (unless
 * SYMCOMM_BOOTSTRAP_TIMEOUT=0 asks for no bound). */
symcommResult_t symcommInit(symcommComm_t* comm, int nranks, int rank, const symcommUniqueId* uid,
                            const symcommConfig_t* config);

/* Collective: joins using the launcher's environment. Rank and size are read, in order,
 * from symrun (SYMCOMM_RANK, SYMCOMM_NRANKS, SYMCOMM_UNIQUE_ID), torchrun (RANK, WORLD_SIZE,
 * LOCAL_RANK, MASTER_ADDR, MASTER_PORT), Open MPI (OMPI_COMM_WORLD_*), PMI (PMI_RANK,
 * PMI_SIZE) and Slurm (SLURM_PROCID, SLURM_NTASKS). Without a unique id in the environment,
 * rank 0 serves the bootstrap root at SYMCOMM_BOOTSTRAP_ROOT ("host:port"), or else at
 * MASTER_ADDR:(MASTER_PORT + SYMCOMM_MASTER_PORT_OFFSET). docs/launch.md has the details. */
symcommResult_t symcommInitFromEnv(symcommComm_t* comm, const symcommConfig_t* config);

/* Collective: leaves the communicator and frees everything it owns, including heap
 * memory still allocated. Returns an error if a peer was lost, but frees all the same.
 * Work it issued on streams must have completed, and CUDA graphs that captured its calls
 * must not be launched after it. */
symcommResult_t symcommFinalize(symcommComm_t comm);

/* Collective over `comm`: every rank of one `color` (>= 0) joins a new communicator of its
 * own, its ranks ordered by `key`, then by rank in `comm`, with the same memory space and
 * device, and a heap of its own; a rank that passes SYMCOMM_COMM_SPLIT_NOCOLOR gets NULL.
 * Each new communicator is made as symcommInit makes one (its own bootstrap root, on its
 * first rank) and is finalized on its own. */
#define SYMCOMM_COMM_SPLIT_NOCOLOR (-1)
symcommResult_t symcommCommSplit(symcommComm_t comm, int color, int key,
                                 symcommComm_t* newcomm);

/* Ends the communicator's work on this rank and tells the others, without waiting for any
 * of them; callable from any thread, also while another thread of this rank waits in a call
 * of the communicator. Every wait of this rank's (host, stream and device waits, barriers,
 * transfers on the network) ends; the liveness connections close, so that the other ranks'
 * waits end with symcommPeerLost within moments, whatever SYMCOMM_PEER_TIMEOUT is. Kernels
 * and copies already running finish. Afterwards this rank's calls on the communicator fail
 * with symcommInvalidUsage naming the abort, except symcommCommGetAsyncError, the queries,
 * and symcommFinalize, which frees it without waiting for the lost ranks. Aborting twice
 * does nothing more. */
symcommResult_t symcommCommAbort(symcommComm_t comm);
/* The communicator's failure, if any, without a call having to fail first: symcommSuccess,
 * or the code a call would fail with (symcommPeerLost where a rank was lost,
 * symcommInvalidUsage after symcommCommAbort, the code a kernel's failed device wait
 * recorded, ...), into *result; symcommGetLastError then says what. Non-blocking, from any
 * thread (a watchdog's), and changes nothing: the failure is reported again by the next call
 * it concerns. */
symcommResult_t symcommCommGetAsyncError(symcommComm_t comm, symcommResult_t* result);

symcommResult_t symcommCommRank(symcommComm_t comm, int* rank);
symcommResult_t symcommCommSize(symcommComm_t comm, int* nranks);
/* Rank among the ranks of this node and their number. */
symcommResult_t symcommCommLocalRank(symcommComm_t comm, int* local_rank);
symcommResult_t symcommCommLocalSize(symcommComm_t comm, int* local_size);
/* Index of the node (0 .. number of nodes - 1, in order of the lowest rank on each). */
symcommResult_t symcommCommNode(symcommComm_t comm, int* node, int* nnodes);
symcommResult_t symcommCommMemorySpace(symcommComm_t comm, symcommMemorySpace_t* space);
/* The CUDA device of this rank (cuda space), or -1 (host space). */
symcommResult_t symcommCommDevice(symcommComm_t comm, int* device);
/* 1 if this rank can load and store the heap of `pe` directly (same node, and P2P
 * capable in the cuda space). Always 1 for pe == own rank. */
symcommResult_t symcommPeerAccessible(symcommComm_t comm, int pe, int* accessible);
/* The transport that carries this rank's operations to `pe` (static string): "lsa" (loads and
 * stores through mapped memory: the peers symcommPeerAccessible accepts), "net" (libfabric,
 * for the others, in the host space) or "none" (none reaches it: operations on it fail,
 * saying why). */
symcommResult_t symcommPeerTransport(symcommComm_t comm, int pe, const char** name);
/* One lane of the "net" transport between this rank and a peer: this rank's rail
 * `local_rail` (its index in SYMCOMM_NET_RAILS) to the peer's rail `remote_rail`. `up` is 0
 * while the lane is down after a failure (it is tried again a second later);
 * `bytes_per_second` is its measured rate (0 until a transfer of 64 KiB or more used it). */
typedef struct {
  int local_rail;
  int remote_rail;
  int up;
  double bytes_per_second;
} symcommNetLane_t;
/* The lanes between this rank and `pe`: the first `max` of them into `lanes` (which may be
 * NULL where max is 0), their number into *count; 0 lanes where "net" does not carry `pe`
 * (docs/transport.md, "Multi-rail"). */
symcommResult_t symcommPeerNetLanes(symcommComm_t comm, int pe, symcommNetLane_t* lanes, int max,
                                    int* count);

/* ------------------------------------------------------------------------------------ */
/* Host-side collectives over the bootstrap network (for setup, not for data)           */
/* ------------------------------------------------------------------------------------ */
/* Each rank contributes `bytes` bytes; `recvbuf` receives nranks * bytes, rank order.
 * Every rank must pass the same `bytes` (checked). Bounded by SYMCOMM_BOOTSTRAP_TIMEOUT.
 * Both host collectives move at most 1 GiB in all: nranks *
 * bytes here, bytes for a broadcast; a larger call is refused (symcommInvalidArgument) by
 * each rank that makes it, before it sends anything. */
symcommResult_t symcommHostAllgather(symcommComm_t comm, const void* sendbuf, void* recvbuf,
                                     size_t bytes);
/* `bytes` bytes of rank `root`'s `buf` to every rank's `buf`. */
symcommResult_t symcommHostBroadcast(symcommComm_t comm, void* buf, size_t bytes, int root);
symcommResult_t symcommHostBarrier(symcommComm_t comm);

/* ------------------------------------------------------------------------------------ */
/* Symmetric heap                                                                       */
/* ------------------------------------------------------------------------------------ */
/* Collective: every rank passes the same `bytes` (> 0) and receives a pointer at the same
 * heap offset, aligned to 256 bytes. The heap grows by chunks of SYMCOMM_HEAP_CHUNK_SIZE
 * up to SYMCOMM_HEAP_MAX. Memory is not cleared. Errors leave the heap as it was:
 * symcommInvalidArgument for bytes == 0, symcommInvalidUsage if ranks pass different sizes,
 * symcommOutOfMemory (with requested, used and maximum sizes in the message). */
symcommResult_t symcommMalloc(symcommComm_t comm, size_t bytes, void** ptr);
/* As symcommMalloc, at an address that is a multiple of `alignment`: a power of two up to the
 * heap's granularity (the page size in the host space, the CUDA allocation granularity,
 * typically 2 MiB, in the cuda space); below 256 it changes nothing. Every rank passes the
 * same alignment (symcommInvalidUsage otherwise); a bad one is symcommInvalidArgument. */
symcommResult_t symcommMallocAligned(symcommComm_t comm, size_t alignment, size_t bytes,
                                     void** ptr);
/* As symcommMalloc for `count` elements of `size` bytes (their product > 0, no overflow:
 * symcommInvalidArgument), cleared to zero on every rank before any rank returns: a peer's
 * put that follows its call is not overwritten by the clearing. */
symcommResult_t symcommCalloc(symcommComm_t comm, size_t count, size_t size, void** ptr);

/* Collective: frees a pointer returned by symcommMalloc; every rank passes its own pointer
 * to the same allocation. A pointer not from the heap, a pointer inside an allocation, a
 * double free, or ranks freeing different allocations are errors that change nothing.
 * symcommFree(comm, NULL) on every rank does nothing. */
symcommResult_t symcommFree(symcommComm_t comm, void* ptr);

/* The address at which the calling process can load/store the object `ptr` (a symmetric
 * address of this rank, anywhere inside an allocation, or an address inside a registered
 * buffer) on rank `pe`: a device address in the cuda space, a host address in the host
 * space. NULL if `pe` is not load/store accessible, or on bad arguments
 * (symcommGetLastError says which). Not collective, cheap. */
void* symcommPtr(symcommComm_t comm, const void* ptr, int pe);

/* Registered buffers: memory the application allocated itself, made reachable by peers
 * once, so that collectives write it in place instead of staging it through their
 * workspace (and symcommPtr translates addresses inside it). Collective over the
 * communicator: every rank passes its own buffer and the same `bytes`, in the same order of
 * registrations. An address at offset o of this rank's buffer stands for offset o of every
 * peer's buffer: pass such buffers to a collective at the same offset on every member, as
 * with symmetric memory. cuda space: memory from cudaMalloc on this rank's GPU (not
 * cuMemCreate or cudaMallocAsync memory, not heap memory, which needs no registration).
 * Errors, the same on every rank: symcommInvalidArgument (NULL, bytes == 0, not device
 * memory of this GPU, overlapping a registration, past the end of its allocation),
 * symcommInvalidUsage (ranks pass different sizes), symcommNotSupported (the host space,
 * which cannot share a process's private memory; memory without a CUDA IPC handle). */
typedef struct symcommRegistration* symcommRegistration_t;
symcommResult_t symcommRegister(symcommComm_t comm, void* ptr, size_t bytes,
                                symcommRegistration_t* registration);
/* Collective: every rank passes its handle of the same registration. Each rank first waits
 * for its device's work to complete; no collective using the buffer may be in flight. The
 * communicator's finalize releases registrations still live. */
symcommResult_t symcommDeregister(symcommComm_t comm, symcommRegistration_t registration);

/* Heap statistics of this rank: bytes in live allocations, bytes of physical memory
 * mapped, and the maximum (SYMCOMM_HEAP_MAX, or the device memory). Any may be NULL. */
symcommResult_t symcommHeapInfo(symcommComm_t comm, size_t* used, size_t* mapped,
                                size_t* maximum);

/* ------------------------------------------------------------------------------------ */
/* Teams                                                                                */
/* ------------------------------------------------------------------------------------ */
/* A team is an ordered subset of the ranks of a communicator: team rank i is world rank
 * start + i * stride. Two teams always exist: the world and the ranks of this node (when
 * they are evenly spaced, as every launcher places them).
 * Creating a team is collective over the whole communicator: every rank calls it, the
 * members of the parent with the same arguments (checked), other ranks with any (they may
 * pass SYMCOMM_TEAM_INVALID as the parent); ranks that are not members of the new team
 * receive SYMCOMM_TEAM_INVALID. Team ids are agreed so that one id means the same team
 * on all its members. */
typedef int32_t symcommTeam_t;
#define SYMCOMM_TEAM_INVALID ((symcommTeam_t)-1)
#define SYMCOMM_TEAM_WORLD ((symcommTeam_t)0)
#define SYMCOMM_TEAM_NODE ((symcommTeam_t)1) /* the ranks of this node (consecutive ranks) */
#define SYMCOMM_MAX_TEAMS 64

/* Members are parent ranks start, start + stride, ... (size of them). */
symcommResult_t symcommTeamSplitStrided(symcommComm_t comm, symcommTeam_t parent, int start,
                                        int stride, int size, symcommTeam_t* team);
/* The parent seen as a grid of rows of `xrange` ranks (the last row may be short): xteam is
 * this rank's row, yteam its column. */
symcommResult_t symcommTeamSplit2D(symcommComm_t comm, symcommTeam_t parent, int xrange,
                                   symcommTeam_t* xteam, symcommTeam_t* yteam);
/* Called by the members (each forgets the team; no operation on it may be in flight). The
 * world and node teams cannot be destroyed. */
symcommResult_t symcommTeamDestroy(symcommComm_t comm, symcommTeam_t team);
/* This rank's index in `team` (-1 if not a member) and the team's size; both -1 for
 * SYMCOMM_TEAM_INVALID, as a non-member receives from a split. */
symcommResult_t symcommTeamRank(symcommComm_t comm, symcommTeam_t team, int* rank);
symcommResult_t symcommTeamSize(symcommComm_t comm, symcommTeam_t team, int* size);
/* The index in `dst_team` of rank `src_pe` of `src_team`, or -1 if it is not a member. */
symcommResult_t symcommTeamTranslate(symcommComm_t comm, symcommTeam_t src_team, int src_pe,
                                     symcommTeam_t dst_team, int* dst_pe);

/* ------------------------------------------------------------------------------------ */
/* One-sided communication on a stream                                                  */
/* ------------------------------------------------------------------------------------ */
/* The same type as cudaStream_t, without requiring the CUDA headers. In the host memory
 * space the stream must be NULL and every operation completes before the call returns. */
struct CUstream_st;
typedef struct CUstream_st* symcommStream_t;

/* Who moves the bytes of a put or get. */
typedef enum {
  symcommEngineAuto = 0, /* chosen by size (SYMCOMM_SM_COPY_MAX): see docs/rma.md     */
  symcommEngineCe = 1,   /* the GPU's copy engines: no SM is used                       */
  symcommEngineSm = 2    /* a copy kernel on SYMCOMM_SM_COPY_BLOCKS blocks              */
} symcommEngine_t;

typedef enum { symcommSignalSet = 0, symcommSignalAdd = 1 } symcommSignalOp_t;
typedef enum {
  symcommCmpEq = 0, symcommCmpNe = 1, symcommCmpGe = 2,
  symcommCmpGt = 3, symcommCmpLe = 4, symcommCmpLt = 5
} symcommCmp_t;

/* Copies `bytes` from `src` (any memory this rank's GPU can read; host memory in the host
 * space) to the symmetric address `dst` on rank `pe`, in stream order. `dst` is given as
 * this rank's symmetric address of the object (as returned by symcommMalloc), and
 * [dst, dst + bytes) must lie inside that one allocation (the bytes asked for), as must a
 * symmetric `src`: a range past its end is refused (symcommInvalidArgument, naming the
 * allocation's size), since it would land in the next allocation. The same holds for a
 * get's symmetric `src` and `dst`, a put-signal's data and word, and collectives' symmetric
 * buffers. A local
 * buffer that a kernel of this GPU cannot touch at its address (pageable host memory,
 * another GPU's memory) goes through the copy engines with symcommEngineAuto, and is refused
 * with symcommEngineSm (symcommInvalidArgument); the same holds for a get's `dst`. */
symcommResult_t symcommPutOnStream(symcommComm_t comm, void* dst, const void* src, size_t bytes,
                                   int pe, symcommEngine_t engine, symcommStream_t stream);
/* Copies `bytes` from the symmetric address `src` on rank `pe` to `dst` (any memory). */
symcommResult_t symcommGetOnStream(symcommComm_t comm, void* dst, const void* src, size_t bytes,
                                   int pe, symcommEngine_t engine, symcommStream_t stream);
/* Put and get that need not be complete when they return (NVSHMEM's _nbi calls): in the host
 * space, to a rank reached by network, the transfer may still be in flight, so that several
 * overlap; `src` of a put must not change, and `dst` of a get must not be read, until it is
 * complete: after symcommQuietOnStream, or after any other call that reaches that transport
 * (a put, get, signal, put-signal, atomic or barrier: each first completes the transfers in
 * flight, so they stay ordered before it). A failure of one is returned by the call that
 * completes it. Otherwise (this node's ranks, the cuda space, where every call is in stream
 * order already) the same as symcommPutOnStream / symcommGetOnStream. */
symcommResult_t symcommPutNbiOnStream(symcommComm_t comm, void* dst, const void* src,
                                      size_t bytes, int pe, symcommEngine_t engine,
                                      symcommStream_t stream);
symcommResult_t symcommGetNbiOnStream(symcommComm_t comm, void* dst, const void* src,
                                      size_t bytes, int pe, symcommEngine_t engine,
                                      symcommStream_t stream);
/* A put followed by an update of the 64-bit symmetric word `sig` on `pe` (set to `value`,
 * or atomically increased by it), which becomes visible only after all the data: a peer that
 * observes the signal with a wait also observes the data. `bytes` may be 0. */
symcommResult_t symcommPutSignalOnStream(symcommComm_t comm, void* dst, const void* src,
                                         size_t bytes, uint64_t* sig, uint64_t value,
                                         symcommSignalOp_t op, int pe, symcommEngine_t engine,
                                         symcommStream_t stream);
/* Holds the stream until this rank's symmetric word `sig` compares to `value` as `cmp`
 * says. Bounded: after SYMCOMM_WAIT_TIMEOUT (0: no time bound), or when the communicator is
 * aborted, the stream goes on, and the next call on this communicator that checks it
 * returns symcommTimeout (or symcommPeerLost) with the signal's address, the expected and
 * the observed value, once. The calls that check: every one-sided call on a stream (put,
 * get, put-signal, signal wait, quiet, barrier), every collective, symcommTeamSplitStrided,
 * symcommTeamSplit2D, symcommDecompCreate, symcommDecompTranspose, symcommDecompHalo, and
 * symcommHostBarrier (after the barrier); others (symcommMalloc, team queries,
 * symcommGetDeviceComm, ...) do not. The same holds for waits in kernels (device.cuh) and
 * for barriers. In the host space the call itself fails instead.
 * One exception is not bounded: SYMCOMM_WAIT_ENGINE=memop, accepted only with
 * SYMCOMM_WAIT_TIMEOUT=0, makes >= and == waits a cuStreamWaitValue64 in the cuda space,
 * which no abort ends either. */
symcommResult_t symcommSignalWaitOnStream(symcommComm_t comm, uint64_t* sig, symcommCmp_t cmp,
                                          uint64_t value, symcommStream_t stream);
/* Every put, get and signal this rank issued on `stream` is complete and visible to its
 * target once the stream reaches this point. */
symcommResult_t symcommQuietOnStream(symcommComm_t comm, symcommStream_t stream);
/* Host-side atomics on rank `pe`'s copy of the 8-byte-aligned symmetric word `word`, atomic
 * with each other from every rank: *result = the value before; the word += `value`, or
 * becomes `desired` where it held `expected`. The host space (`stream` NULL): the call returns
 * with the result (on this node by the processor's atomics, across nodes by the target's
 * proxy). The cuda space: on `stream`, by the GPU's system-scope atomics (atomic with the
 * device API's atomic_fetch_add and atomic_compare_swap), *result written when the stream
 * gets there (memory this rank's GPU reaches: device, managed or pinned); members on another
 * node are refused with symcommNotSupported, as the device API refuses them. */
symcommResult_t symcommAtomicFetchAddOnStream(symcommComm_t comm, uint64_t* word, uint64_t value,
                                              int pe, uint64_t* result, symcommStream_t stream);
symcommResult_t symcommAtomicCompareSwapOnStream(symcommComm_t comm, uint64_t* word,
                                                 uint64_t expected, uint64_t desired, int pe,
                                                 uint64_t* result, symcommStream_t stream);
/* A barrier over `team` in stream order: no member's stream passes it before every member's
 * stream reached it, and every put issued before it is visible after it. */
symcommResult_t symcommBarrierOnStream(symcommComm_t comm, symcommTeam_t team,
                                       symcommStream_t stream);

#pragma GCC visibility pop
#ifdef __cplusplus
} /* extern "C" */
#endif

/* The collectives on a stream (symcomm/coll.h) are part of this API. */
#include "symcomm/coll.h"  /* IWYU pragma: export */

#endif /* SYMCOMM_SYMCOMM_H_ */
