// The symmetric heap and the host-side collectives.
#include <cstdint>

#include "capi/guard.h"
#include "memory/peer_address.h"

using namespace symcomm;

extern "C" symcommResult_t symcommMalloc(symcommComm_t comm, size_t bytes, void** ptr) {
  return guarded([&] { return format("symcommMalloc(bytes=%zu)", bytes); }, [&] {
    symcommComm& c = checked(comm);
    SYMCOMM_REQUIRE_ARG(ptr);
    *ptr = nullptr;
    *ptr = c.heap->malloc(bytes);
    c.rma->backend().publish_allocations(c.heap->user_allocations());
  });
}

extern "C" symcommResult_t symcommMallocAligned(symcommComm_t comm, size_t alignment,
                                                size_t bytes, void** ptr) {
  return guarded(
      [&] { return format("symcommMallocAligned(alignment=%zu, bytes=%zu)", alignment, bytes); },
      [&] {
        symcommComm& c = checked(comm);
        SYMCOMM_REQUIRE_ARG(ptr);
        *ptr = nullptr;
        *ptr = c.heap->malloc(bytes, alignment);
        c.rma->backend().publish_allocations(c.heap->user_allocations());
      });
}

extern "C" symcommResult_t symcommCalloc(symcommComm_t comm, size_t count, size_t size,
                                         void** ptr) {
  return guarded([&] { return format("symcommCalloc(count=%zu, size=%zu)", count, size); }, [&] {
    symcommComm& c = checked(comm);
    SYMCOMM_REQUIRE_ARG(ptr);
    *ptr = nullptr;
    // An overflowing product (on any rank) is refused on every rank: none then allocates.
    c.bootstrap->agree_on([&] {
      SYMCOMM_REQUIRE(size == 0 || count <= SIZE_MAX / size, symcommInvalidArgument,
                      "%zu elements of %zu bytes overflow size_t", count, size);
    });
    const size_t bytes = count * size;
    void* p = c.heap->malloc(bytes);
    c.rma->backend().publish_allocations(c.heap->user_allocations());
    try {
      // Agreed on: no rank returns (and puts into it) before every rank cleared its copy, and
      // where one rank could not, every rank frees it again.
      c.bootstrap->agree_on([&] { c.rma->backend().clear(p, bytes); });
    } catch (...) {
      try {
        c.heap->free(p);
        c.rma->backend().publish_allocations(c.heap->user_allocations());
      } catch (const Error&) {  // the communicator failed: the first error is the one to report
      }
      throw;
    }
    *ptr = p;
  });
}

extern "C" symcommResult_t symcommFree(symcommComm_t comm, void* ptr) {
  return guarded([&] { return format("symcommFree(ptr=%p)", ptr); }, [&] {
    symcommComm& c = checked(comm);
    c.heap->free(ptr);
    c.rma->backend().publish_allocations(c.heap->user_allocations());
  });
}

extern "C" void* symcommPtr(symcommComm_t comm, const void* ptr, int pe) {
  void* out = nullptr;
  guarded([&] { return format("symcommPtr(ptr=%p, pe=%d)", ptr, pe); }, [&] {
    symcommComm& c = checked(comm);
    out = peer_address(*c.heap, c.registrations.get(), ptr, pe);
    // NULL with a reason, as the header promises.
    if (!out && c.topology.accessible[static_cast<size_t>(pe)] == 0)
      SYMCOMM_THROW(symcommNotSupported, "%s", c.topology.why_inaccessible(pe).c_str());
    SYMCOMM_REQUIRE(out, symcommInternalError, "rank %d's copy of %p is not mapped here", pe, ptr);
  });
  return out;
}

extern "C" symcommResult_t symcommRegister(symcommComm_t comm, void* ptr, size_t bytes,
                                           symcommRegistration_t* registration) {
  return guarded([&] { return format("symcommRegister(ptr=%p, bytes=%zu)", ptr, bytes); }, [&] {
    symcommComm& c = checked(comm);
    SYMCOMM_REQUIRE_ARG(registration);
    *registration = nullptr;
    const Registration* r = c.registrations->add(ptr, bytes);
    *registration = reinterpret_cast<symcommRegistration_t>(const_cast<Registration*>(r));
  });
}

extern "C" symcommResult_t symcommDeregister(symcommComm_t comm,
                                             symcommRegistration_t registration) {
  return guarded([&] { return format("symcommDeregister(%p)", static_cast<void*>(registration)); },
                 [&] {
                   symcommComm& c = checked(comm);
                   c.registrations->remove(reinterpret_cast<const Registration*>(registration));
                 });
}

extern "C" symcommResult_t symcommHeapInfo(symcommComm_t comm, size_t* used, size_t* mapped,
                                           size_t* maximum) {
  return guarded([] { return std::string("symcommHeapInfo"); }, [&] {
    symcommComm& c = checked(comm);
    if (used) *used = c.heap->used();
    if (mapped) *mapped = c.heap->mapped();
    if (maximum) *maximum = c.heap->max_bytes();
  });
}

namespace {

// What one host collective may move in all: the bootstrap goes through rank 0's sockets, for
// setup data. A call above it would fail to allocate on some rank, out of step with the rest.
constexpr size_t kHostCollMaxBytes = size_t{1} << 30;

void check_host_coll_size(size_t bytes, size_t parts, const char* what) {
  SYMCOMM_REQUIRE(bytes <= kHostCollMaxBytes / parts, symcommInvalidArgument,
                  "%s of %zu bytes x %zu ranks is more than the host collectives' limit of %s: "
                  "they are for setup data",
                  what, bytes, parts, format_bytes(kHostCollMaxBytes).c_str());
}

}  // namespace

extern "C" symcommResult_t symcommHostAllgather(symcommComm_t comm, const void* sendbuf,
                                                void* recvbuf, size_t bytes) {
  return guarded([&] { return format("symcommHostAllgather(bytes=%zu)", bytes); }, [&] {
    symcommComm& c = checked(comm);
    if (bytes) {
      SYMCOMM_REQUIRE_ARG(sendbuf);
      SYMCOMM_REQUIRE_ARG(recvbuf);
    }
    check_host_coll_size(bytes, static_cast<size_t>(c.topology.nranks), "an allgather");
    c.bootstrap->allgather(sendbuf, bytes, recvbuf);
  });
}

extern "C" symcommResult_t symcommHostBroadcast(symcommComm_t comm, void* buf, size_t bytes,
                                                int root) {
  return guarded([&] { return format("symcommHostBroadcast(bytes=%zu, root=%d)", bytes, root); },
                 [&] {
                   symcommComm& c = checked(comm);
                   if (bytes) SYMCOMM_REQUIRE_ARG(buf);
                   check_host_coll_size(bytes, 1, "a broadcast");
                   // A root out of range still takes part, so that every rank fails at once
                   // (the hub checks every rank's root); its own rank says what it passed.
                   const int n = c.topology.nranks;
                   try {
                     c.bootstrap->broadcast(buf, bytes, root);
                   } catch (const Error&) {
                     if (root >= 0 && root < n) throw;
                     SYMCOMM_THROW(symcommInvalidArgument, "root %d is out of range [0, %d)",
                                   root, n);
                   }
                 });
}

extern "C" symcommResult_t symcommHostBarrier(symcommComm_t comm) {
  return guarded([] { return std::string("symcommHostBarrier"); }, [&] {
    symcommComm& c = checked(comm);
    c.bootstrap->barrier();
    // A host-side sync point: report a device-side wait failure here too, once every rank
    // passed the barrier, so that the ranks stay in step.
    c.rma->backend().raise_recorded_error();
  });
}
