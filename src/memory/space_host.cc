// The host memory space: memfd segments shared between the processes of a node, mapped at
// the same offsets into one reserved window per peer.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>

#include "base/error.h"
#include "base/log.h"
#include "memory/space.h"

namespace symcomm {

namespace {

class HostSpace final : public Space {
 public:
  symcommMemorySpace_t kind() const override { return symcommSpaceHost; }
  const char* name() const override { return "host"; }
  size_t granularity() const override { return static_cast<size_t>(sysconf(_SC_PAGESIZE)); }
  size_t default_max_bytes() const override { return size_t{16} << 30; }
  size_t default_chunk_bytes() const override { return size_t{64} << 20; }

  void* reserve(size_t bytes) override {
    void* p = mmap(nullptr, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) throw_system_error(__FILE__, __LINE__, "mmap(reserve)", errno);
    return p;
  }
  void unreserve(void* base, size_t bytes) override {
    if (munmap(base, bytes) != 0) SYMCOMM_WARN("munmap of a heap window failed: %s", strerror(errno));
  }

  uint64_t create(size_t bytes) override {
    Fd fd(memfd_create("symcomm-heap", MFD_CLOEXEC));
    SYMCOMM_SYSCHECK(fd.get());
    // fallocate reserves the pages now, so that exhaustion is an error here rather than a
    // SIGBUS at first touch.
    int rc = posix_fallocate(fd.get(), 0, static_cast<off_t>(bytes));
    if (rc != 0)
      SYMCOMM_THROW(rc == ENOSPC ? symcommOutOfMemory : symcommSystemError,
                    "cannot allocate %s of shared host memory: %s", format_bytes(bytes).c_str(),
                    strerror(rc));
    return static_cast<uint64_t>(fd.release());
  }
  void destroy(uint64_t handle) override { close(static_cast<int>(handle)); }  // EINTR-safe on Linux

  void map(void* addr, size_t bytes, uint64_t handle) override {
    map_fd(addr, bytes, static_cast<int>(handle));
  }
  SharedHandle share(uint64_t handle) override {
    SharedHandle h;
    h.fd.reset(fcntl(static_cast<int>(handle), F_DUPFD_CLOEXEC, 0));
    SYMCOMM_SYSCHECK(h.fd.get());
    return h;
  }
  void map_peer(void* addr, size_t bytes, const SharedHandle& handle) override {
    map_fd(addr, bytes, handle.fd.get());
  }
  void unmap(void* addr, size_t bytes) override {
    void* p = mmap(addr, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED,
                   -1, 0);
    if (p == MAP_FAILED) throw_system_error(__FILE__, __LINE__, "mmap(unmap)", errno);
  }

 private:
  static void map_fd(void* addr, size_t bytes, int fd) {
    void* p = mmap(addr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0);
    if (p == MAP_FAILED) throw_system_error(__FILE__, __LINE__, "mmap(MAP_SHARED|MAP_FIXED)", errno);
  }
};

}  // namespace

std::unique_ptr<Space> make_host_space() { return std::make_unique<HostSpace>(); }

}  // namespace symcomm
