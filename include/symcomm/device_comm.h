/*
 * symcomm::DeviceComm: the handle that device code uses to reach the symmetric heap of a
 * communicator's team. A plain, trivially copyable struct: get one on the host with
 * symcommGetDeviceComm and pass it by value to your kernels. The functions that use it are
 * in symcomm/device.cuh (CUDA only); this header compiles in host-only code too.
 */
#ifndef SYMCOMM_DEVICE_COMM_H_
#define SYMCOMM_DEVICE_COMM_H_

#include <stdint.h>

#include <type_traits>

#include "symcomm/symcomm.h"

namespace symcomm {

/* Where a device-side wait that failed records what it waited for. Lives in host-mapped
 * memory; the host reads it at the communicator's next call and reports it in the error
 * message. A failure that finds a code already recorded leaves the record alone; the code is
 * written last. (No atomics: host memory takes none from the GPU over PCIe.) */
struct DeviceError {
  int32_t code;      /* 0, symcommTimeout or symcommPeerLost; symcommInvalidArgument for
                        a call that SYMCOMM_DEVICE_CHECKS refused, or whose local side a
                        member on another node cannot be given (shared memory);
                        symcommNotSupported for an atomic to such a member
                        (symcomm/device.cuh)                                           */
  int32_t pe;        /* the waiter's own rank for a signal wait; for a barrier's wait,
                        the world rank of the member that did not arrive; for a refused
                        call, the world rank it addressed                             */
  int32_t cmp;       /* symcommCmp_t of the wait; for a refused call, why (DeviceRefusal) */
  int32_t block;     /* blockIdx.x of the waiting thread, for debugging                 */
  uint64_t address;  /* the watched address, as the waiting process maps it; for a
                        refused call, the symmetric address it was given              */
  uint64_t expected; /* the value compared against; for a refused call, its bytes       */
  uint64_t observed; /* the last value read; for a refused call, the bytes from the
                        address to the end of its allocation (0: in none)             */
};

/* Why a device-side call was refused (DeviceError::cmp of its record). */
enum DeviceRefusal : int32_t {
  kRefusedBounds = -1,    /* its range leaves its allocation (SYMCOMM_DEVICE_CHECKS)       */
  kRefusedLocalSide = -2, /* to a member on another node: the local side is not global
                             memory (shared or local memory), which the transport cannot
                             reach (a put-signal within DeviceNetRing::inline_max can) */
  kRefusedAtomic = -3,    /* an atomic to a member on another node                         */
  kRefusedNoRing = -4     /* to a member on another node, with a handle that has no ring   */
};

/* The heap's live allocations, for the checks of SYMCOMM_DEVICE_CHECKS (symcomm/device.cuh):
 * host-mapped, rewritten by the host at every symcommMalloc and symcommFree. */
#define SYMCOMM_DEVICE_MAX_ALLOCATIONS 1024
struct DeviceAllocations {
  uint64_t version; /* odd while the host rewrites the table                            */
  uint64_t count;   /* allocations listed; more than SYMCOMM_DEVICE_MAX_ALLOCATIONS: too
                       many to list, and nothing is checked                            */
  uint64_t entries[2 * SYMCOMM_DEVICE_MAX_ALLOCATIONS]; /* (heap offset, bytes asked
                       for) of each allocation, by offset                             */
};

/* One operation that a kernel hands to the transport of a team member it does not reach by
 * load and store (a rank on another node): a descriptor in a slot of the GPU-to-proxy ring.
 * The kernel writes every field, then `ticket` last (after a system-scope fence). */
enum DeviceNetOpKind : uint32_t {
  kDeviceNetPut = 1,       /* `bytes` from `local` to heap offset `offset` of `pe`          */
  kDeviceNetGet = 2,       /* `bytes` at heap offset `offset` of `pe` to `local`           */
  kDeviceNetSignal = 3,    /* the signal word at heap offset `signal` of `pe`: `value`, `op` */
  kDeviceNetPutSignal = 4, /* a put, then the signal, applied after the data               */
  kDeviceNetQuiet = 5,     /* everything handed over before it has been applied            */
  kDeviceNetPutSignalInline = 6 /* a put-signal whose `bytes` travel in `data` (at most
                              DeviceNetRing::inline_max): the kernel copied them there    */
};
/* The payload bytes a descriptor carries (DeviceNetOp::data). */
constexpr uint64_t kDeviceNetInlineBytes = 64;
struct DeviceNetOp {
  uint64_t ticket;  /* the operation's number + 1 once the slot holds it                 */
  uint32_t kind;    /* DeviceNetOpKind                                                   */
  int32_t pe;       /* world rank                                                        */
  uint64_t offset;  /* of the data in pe's heap                                          */
  uint64_t local;   /* address of this rank's side (global memory of this GPU or mapped) */
  uint64_t bytes;
  uint64_t signal;  /* heap offset of the signal word                                    */
  uint64_t value;
  uint32_t op;      /* symcommSignalOp_t                                                 */
  uint32_t pad;
  uint8_t data[kDeviceNetInlineBytes]; /* kDeviceNetPutSignalInline: the payload            */
};

/* The GPU-to-proxy ring of a rank (all of its teams' handles share it): how the device API
 * reaches team members that are not load/store accessible. A kernel takes a ticket (an
 * atomic add on `tail`), waits until the slot ticket % capacity is free (`freed`), writes the
 * descriptor; the transport's worker thread reads the slots in ticket order, marks each slot
 * freed, carries the operation out and counts it in `done`. Zeros where every member is
 * mapped (or in the host space). */
struct DeviceNetRing {
  DeviceNetOp* slots;             /* host-mapped, [capacity]                               */
  unsigned long long* tail;       /* device memory: tickets taken                          */
  unsigned long long* flushed;    /* device memory: `tail` when a quiet last completed     */
  const uint64_t* freed;          /* host-mapped: slots read (tickets below it are free)   */
  const uint64_t* done;           /* host-mapped: operations carried out, in ticket order  */
  uint64_t capacity;              /* slots, a power of 2                                   */
  /* The bounce buffers: a put's source or a get's destination outside the heap (cudaMalloc
   * memory, mapped host memory) goes through them in pieces, copied by the calling thread,
   * because the transport's copies cannot reach such memory reliably while the application's
   * kernels run (transport.md). `bounce` is device memory that every context of the device
   * reaches, [kDeviceNetBounceSlots][kDeviceNetBounceBytes]; a caller takes a bounce ticket
   * (an atomic add on `bounce_tail`), waits until slot ticket % kDeviceNetBounceSlots is in
   * its generation (bounce_gen[slot] == ticket / kDeviceNetBounceSlots), and hands the slot
   * on (bounce_gen[slot] + 1) once its operation is done and a get's data copied out. */
  char* bounce;
  unsigned long long* bounce_tail; /* device memory */
  uint64_t* bounce_gen;            /* device memory, [kDeviceNetBounceSlots] */
  const char* heap_lo;             /* this rank's heap window: [heap_lo, heap_hi) goes direct */
  const char* heap_hi;
  /* A put-signal of up to this many bytes (at most kDeviceNetInlineBytes;
   * SYMCOMM_NET_DEVICE_INLINE) carries its payload in the descriptor: the calling thread
   * copies it there from wherever it is (shared memory too) and returns once the descriptor
   * is handed over, as a signal does. The transport sends it from host memory: no copy out
   * of the GPU, no bounce slot, no wait for the transport. */
  uint64_t inline_max;
};
constexpr uint64_t kDeviceNetBounceSlots = 32;
constexpr uint64_t kDeviceNetBounceBytes = 64 << 10;

/* Team members whose windows the handle holds itself (see DeviceComm::near_base). */
#define SYMCOMM_DEVICE_COMM_NEAR 8

struct DeviceComm {
  int32_t rank;        /* world rank of this process                                   */
  int32_t nranks;      /* ranks in the communicator                                    */
  int32_t team_rank;   /* this rank's index in the team                                */
  int32_t team_size;   /* members of the team                                          */
  int32_t team_start;  /* team member i is world rank team_start + i * team_stride     */
  int32_t team_stride;
  char* base;          /* this rank's heap window: a symmetric address is base + offset */
  char* const* peer_base; /* device array [nranks]: rank pe's window as mapped here,
                             nullptr where pe is not load/store accessible             */
  char* near_base[SYMCOMM_DEVICE_COMM_NEAR]; /* team members 0..7: peer_base of their world
                             rank, held here so that a kernel reaches them without a memory
                             load (a system-scope acquire, as every wait ends with, empties
                             the L1 cache: the next peer_base load would go to L2). Declare
                             the kernel parameter `const __grid_constant__ DeviceComm` so
                             that indexing it reads the parameter space, not a local copy. */
  uint64_t* barrier_slots; /* symmetric, [nranks] words of this team's barrier         */
  uint64_t* barrier_epoch; /* device memory, one word: barriers this rank entered      */
  const volatile int32_t* abort_flag; /* host-mapped: non-zero once aborted (peer lost) */
  DeviceError* error;  /* host-mapped                                                  */
  uint64_t wait_timeout_ns; /* the bound of every wait (SYMCOMM_WAIT_TIMEOUT)           */
  const DeviceAllocations* allocations; /* host-mapped; read under SYMCOMM_DEVICE_CHECKS */
  DeviceNetRing net;   /* members on other nodes (not mapped): through the transport     */
};

static_assert(std::is_trivially_copyable<DeviceComm>::value, "DeviceComm is passed by value");
static_assert(sizeof(DeviceNetOp) == 128, "a descriptor fills one slot of two 64-byte lines");

#if defined(__CUDACC__)
#define SYMCOMM_HOST_DEVICE __host__ __device__
#else
#define SYMCOMM_HOST_DEVICE
#endif

/* Whether a signal word holding `seen` satisfies `cmp` against `value` (the same test on
 * the host and on the device). */
SYMCOMM_HOST_DEVICE inline bool compare(uint64_t seen, symcommCmp_t cmp, uint64_t value) {
  switch (cmp) {
    case symcommCmpEq: return seen == value;
    case symcommCmpNe: return seen != value;
    case symcommCmpGe: return seen >= value;
    case symcommCmpGt: return seen > value;
    case symcommCmpLe: return seen <= value;
    case symcommCmpLt: return seen < value;
  }
  return false;
}

}  // namespace symcomm

extern "C" {
/* A handle for `team` (SYMCOMM_TEAM_WORLD, SYMCOMM_TEAM_NODE or a split). cuda space only
 * (symcommNotSupported in the host space). The handle stays valid until the team is
 * destroyed or the communicator finalized; heap growth does not invalidate it. */
__attribute__((visibility("default"))) symcommResult_t symcommGetDeviceComm(
    symcommComm_t comm, symcommTeam_t team, symcomm::DeviceComm* handle);
}

#endif /* SYMCOMM_DEVICE_COMM_H_ */
