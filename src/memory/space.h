// A memory space: where symmetric-heap memory physically lives and how a process maps
// memory that another process of its node created. One small interface, one file per
// implementation (space_cuda.cc, space_host.cc), one registry line in space.cc.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>

#include "bootstrap/socket.h"
#include "symcomm/symcomm.h"
#include "topology/topology.h"

namespace symcomm {

// How a chunk travels to a peer: a file descriptor (over a Unix socket) or, for fabric
// handles, 64 bytes that travel over the bootstrap network.
struct SharedHandle {
  Fd fd;
  std::array<uint8_t, 64> bytes{};
};

class Space {
 public:
  virtual ~Space() = default;
  virtual symcommMemorySpace_t kind() const = 0;
  virtual const char* name() const = 0;
  // Sizes and offsets of chunks are multiples of this.
  virtual size_t granularity() const = 0;
  // Defaults for SYMCOMM_HEAP_MAX and SYMCOMM_HEAP_CHUNK_SIZE.
  virtual size_t default_max_bytes() const = 0;
  virtual size_t default_chunk_bytes() const = 0;
  // True when handles travel as bytes (SharedHandle::bytes) rather than descriptors.
  virtual bool handles_are_bytes() const { return false; }

  // An address window with nothing behind it yet.
  virtual void* reserve(size_t bytes) = 0;
  virtual void unreserve(void* base, size_t bytes) = 0;
  // Physical memory of this process (an opaque handle), and its mapping at `addr`.
  virtual uint64_t create(size_t bytes) = 0;
  virtual void destroy(uint64_t handle) = 0;
  virtual void map(void* addr, size_t bytes, uint64_t handle) = 0;
  virtual SharedHandle share(uint64_t handle) = 0;
  // Maps a peer's chunk at `addr` for this process's loads and stores.
  virtual void map_peer(void* addr, size_t bytes, const SharedHandle& handle) = 0;
  // Returns [addr, addr + bytes) to the reserved state.
  virtual void unmap(void* addr, size_t bytes) = 0;

  // Buffers the application allocated itself (symcommRegister). The handle of the
  // allocation that holds [ptr, ptr + bytes), as 64 bytes that travel over the bootstrap
  // network, and ptr's offset in that allocation. Throws symcommInvalidArgument for memory
  // that is not this rank's device memory, symcommNotSupported where the space cannot share
  // such memory (the host space: a process's private memory).
  virtual SharedHandle share_buffer(const void* ptr, size_t bytes, size_t* offset);
  // Maps a local peer's shared allocation here; returns where it starts.
  virtual char* open_buffer(const SharedHandle& handle);
  virtual void close_buffer(char* base);
  // Waits until this process's work on its device has completed (nothing on the host).
  virtual void synchronize() {}
  // Why this rank's device cannot load from and store to `ptr` at that address ("" where it
  // can): a buffer of the application's that an operation's kernels or copy engines will
  // touch (pageable host memory in the cuda space, or another GPU's memory). Accepts
  // everything by default, as the host space must: all its memory is host memory.
  virtual std::string device_access_problem(const void* /*ptr*/) const { return ""; }
  // Throws symcommInvalidArgument, naming `what` ("input"), where device_access_problem
  // finds one.
  void check_device_accessible(const void* ptr, const char* what) const;
};

std::unique_ptr<Space> make_host_space();
std::unique_ptr<Space> make_cuda_space(int device);

// The space a communicator asks for: `requested`, or SYMCOMM_MEMORY_SPACE when it is
// symcommSpaceAuto; auto picks cuda when a driver and a GPU are present and otherwise host,
// saying why once per process. Asking for cuda without a GPU is symcommNotSupported.
symcommMemorySpace_t resolve_space(symcommMemorySpace_t requested);
const char* space_name(symcommMemorySpace_t space);
std::unique_ptr<Space> make_space(symcommMemorySpace_t space, const Topology& topology);

}  // namespace symcomm
