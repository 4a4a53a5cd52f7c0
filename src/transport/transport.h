// How bytes reach one peer. Each peer of a communicator is served by one transport, fixed at
// init: the first registered kind whose can_connect accepts the peer (`lsa`, load/store
// through mapped memory, then `net`, a host proxy over libfabric). One communicator mixes
// them: node peers by load/store, the others by network. A new transport is one folder under
// src/transport/ whose file registers a TransportKind; nothing else names it.
//
// Addresses a transport receives are this rank's symmetric addresses (heap), standing for
// the same offset on the peer, as the public API takes them, or addresses in a registered
// buffer (symcommRegister), standing for the same offset of the peer's; the transport
// translates them (a mapped pointer for lsa, a remote key and address for net). A transport
// says whether it reaches registered buffers (registered_buffers()); net does not yet.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/registry.h"
#include "bootstrap/bootstrap.h"
#include "memory/heap.h"
#include "memory/registration.h"
#include "symcomm/device_comm.h"
#include "symcomm/symcomm.h"
#include "topology/topology.h"

namespace symcomm {

// What moves bytes between memory mapped in this process: the memory space's copy engines,
// copy kernels or CPU copies (rma's backends implement it). `dst`, `src` and `sig` are
// addresses as mapped here.
class LoadStoreMover {
 public:
  virtual ~LoadStoreMover() = default;
  virtual void put(void* dst, const void* src, size_t bytes, symcommEngine_t engine,
                   symcommStream_t stream) = 0;
  virtual void get(void* dst, const void* src, size_t bytes, symcommEngine_t engine,
                   symcommStream_t stream) = 0;
  // Ordered after everything before it on `stream`.
  virtual void signal(uint64_t* sig, uint64_t value, symcommSignalOp_t op,
                      symcommStream_t stream) = 0;
  // On the mapped word, in `stream`'s order: *result = the value before; the word += operand,
  // or (compare_swap) becomes `desired` where it held `operand`. The GPU's system-scope
  // atomics in the cuda space (atomic with the device API's), `result` memory it writes.
  virtual void atomic(uint64_t* word, uint64_t operand, uint64_t desired, bool compare_swap,
                      uint64_t* result, symcommStream_t stream) = 0;
};

// What a transport is opened with: the communicator's layers below rma.
struct TransportContext {
  Bootstrap& bootstrap;
  const Topology& topology;
  Heap& heap;
  const Registrations& registrations;
  symcommMemorySpace_t space;
  LoadStoreMover& mover;
};

// One transport of one communicator, serving the peers the registry gave it. Host-side
// calls; in the host space each completes in its call (a put's data has landed at the target
// when it returns), as the host space's load/store operations do, but put_nbi and get_nbi.
class Transport {
 public:
  virtual ~Transport() = default;
  virtual const char* name() const = 0;
  // Whether its peers' memory is mapped here (symcommPtr gives a pointer; kernels reach it).
  virtual bool load_store() const { return false; }
  // Whether it reaches the peers' registered buffers (else only their heaps).
  virtual bool registered_buffers() const { return false; }
  virtual void put(int pe, void* dst, const void* src, size_t bytes, symcommEngine_t engine,
                   symcommStream_t stream) = 0;
  virtual void get(int pe, void* dst, const void* src, size_t bytes, symcommEngine_t engine,
                   symcommStream_t stream) = 0;
  // A put or get that may return before it completes (symcommPutNbiOnStream): complete by
  // the transport's next other call (quiet included), which completes it first. The default:
  // put and get.
  virtual void put_nbi(int pe, void* dst, const void* src, size_t bytes, symcommEngine_t engine,
                       symcommStream_t stream) {
    put(pe, dst, src, bytes, engine, stream);
  }
  virtual void get_nbi(int pe, void* dst, const void* src, size_t bytes, symcommEngine_t engine,
                       symcommStream_t stream) {
    get(pe, dst, src, bytes, engine, stream);
  }
  // The target word `sig` is updated only after everything this rank put to `pe` before it
  // has landed.
  virtual void signal(int pe, uint64_t* sig, uint64_t value, symcommSignalOp_t op,
                      symcommStream_t stream) = 0;
  // The signal, sent only if, when the stream gets there, `*condition` (host memory that the
  // GPU may write) equals `when`; then it has also been applied at the target when the
  // stream goes on. For what the GPU decides after the call was issued (a failed barrier
  // taking its arrivals back). Transports whose signals are the GPU's own need no such call.
  virtual void signal_if(int pe, uint64_t* sig, uint64_t value, symcommSignalOp_t op,
                         const uint64_t* condition, uint64_t when, symcommStream_t stream) {
    static_cast<void>(pe), static_cast<void>(sig), static_cast<void>(value);
    static_cast<void>(op), static_cast<void>(condition), static_cast<void>(when);
    static_cast<void>(stream);
  }
  // A put followed by a signal; a transport may carry both in one message.
  virtual void put_signal(int pe, void* dst, const void* src, size_t bytes, uint64_t* sig,
                          uint64_t value, symcommSignalOp_t op, symcommEngine_t engine,
                          symcommStream_t stream) {
    if (bytes) put(pe, dst, src, bytes, engine, stream);
    signal(pe, sig, value, op, stream);
  }
  // Atomic on the target's word (host calls, returning the value before): one path per word,
  // so that they are atomic with each other whichever rank issues them.
  virtual uint64_t fetch_add(int pe, uint64_t* word, uint64_t value) = 0;
  virtual uint64_t compare_swap(int pe, uint64_t* word, uint64_t expected, uint64_t desired) = 0;
  // The cuda space's: on `stream`, *result (memory this rank's GPU writes) = the value before,
  // when the stream reaches it (LoadStoreMover::atomic). Only load/store peers so far.
  virtual void atomic_on_stream(int pe, uint64_t* word, uint64_t operand, uint64_t desired,
                                bool compare_swap, uint64_t* result, symcommStream_t stream) {
    static_cast<void>(word), static_cast<void>(operand), static_cast<void>(desired);
    static_cast<void>(compare_swap), static_cast<void>(result), static_cast<void>(stream);
    SYMCOMM_THROW(symcommNotSupported,
                  "host-side atomics in the cuda space reach members on this node only so far; "
                  "rank %d is reached by the %s transport (the device API refuses atomics to "
                  "it too)", pe, name());
  }
  // Everything this rank issued to its peers through this transport has landed.
  virtual void quiet(symcommStream_t stream) = 0;
  // The communicator lost a peer: operations in flight end with symcommPeerLost.
  virtual void abort() {}
  // Declares words of this rank's heap that only one rank ever changes by signals, each its
  // own (a barrier's count of one member's arrivals; hier's syncs): the net transport may
  // then apply an add to one of them in GPU memory as a read and a write, without a kernel
  // (gpu_landing.h says why a kernel of its own is slow there). Collective layers call it
  // once for the words they allocate; they live as long as the communicator.
  virtual void single_writer_words(const void* base, size_t bytes) {
    static_cast<void>(base), static_cast<void>(bytes);
  }
  // The GPU-to-proxy ring through which kernels reach this transport's peers (the device
  // API; transport/device_ring.h), made at the first call; zeros where there is none (kernels
  // reach the peers themselves, or the memory space has no kernels).
  virtual DeviceNetRing device_ring() { return DeviceNetRing{}; }
  // The lanes that carry this rank's operations to `pe` (symcommPeerNetLanes); none for a
  // transport without rails.
  virtual std::vector<symcommNetLane_t> net_lanes(int pe) const {
    static_cast<void>(pe);
    return {};
  }
  // Throws, once, the failure of work done for this rank with no caller waiting to be told
  // (a job of a stream, an operation a kernel handed over).
  virtual void raise_failure() {}
  // Handles, on the calling thread, what has arrived for this rank, where that takes no wait
  // (another thread handling it already: nothing). A host-space wait on a word that a peer's
  // message sets calls it as it spins, so the message is applied by the thread that waits
  // for it, not handed over by a thread of the transport's.
  virtual void progress() {}
};

// A family of transports: one registered object per kind, opened once per communicator.
class TransportKind {
 public:
  virtual ~TransportKind() = default;
  virtual const char* name() const = 0;
  // Whether this kind can reach world rank `pe` from this rank, and where not, why.
  virtual Verdict can_connect(const TransportContext& ctx, int pe) const = 0;
  // Collective over the communicator whenever any rank has a peer of this kind (`peers` may
  // be empty here): every rank calls it, in the same order. A failure on any rank fails the
  // communicator's init on every rank with the reason.
  virtual std::unique_ptr<Transport> open(TransportContext& ctx,
                                          const std::vector<int>& peers) const = 0;
};

// The transports of one communicator and the one each peer uses.
class Transports {
 public:
  // Collective: chooses each peer's transport and opens every kind that some rank needs.
  explicit Transports(TransportContext ctx);
  ~Transports();

  // The transport of world rank `pe`; throws symcommNotSupported naming, for each kind, why
  // none can reach it.
  Transport& to(int pe) const;
  bool connected(int pe) const { return of_[static_cast<size_t>(pe)] != nullptr; }
  // "lsa", "net", or "none".
  const char* name_of(int pe) const;
  // Why no transport reaches `pe` ("" where one does).
  const std::string& why_unconnected(int pe) const { return why_[static_cast<size_t>(pe)]; }
  void quiet(symcommStream_t stream);
  void abort();
  // Transport::progress of each open transport.
  void progress();
  // Transport::single_writer_words of each open transport.
  void single_writer_words(const void* base, size_t bytes);
  // Transport::raise_failure of each open transport.
  void raise_failure();

 private:
  std::vector<std::unique_ptr<Transport>> open_;
  std::vector<Transport*> of_;     // per rank; nullptr where none can connect
  std::vector<std::string> why_;   // per rank: why none can connect
};

}  // namespace symcomm
