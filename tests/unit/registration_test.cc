// Registrations' range arithmetic on one rank, through a space that shares any buffer (the
// host space shares none): a size near SIZE_MAX must not wrap past the end of the address
// space, neither in find nor in add's check for overlapping registrations.
#include <gtest/gtest.h>

#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "base/error.h"
#include "memory/heap.h"
#include "memory/registration.h"
#include "one_rank_memory.h"

namespace symcomm {
namespace {

// Shares every buffer, as the cuda space shares device memory; one rank opens none. Its heap
// never grows.
class ShareAnything final : public Space {
 public:
  symcommMemorySpace_t kind() const override { return symcommSpaceHost; }
  const char* name() const override { return "share-anything"; }
  size_t granularity() const override { return 4096; }
  size_t default_max_bytes() const override { return size_t{1} << 20; }
  size_t default_chunk_bytes() const override { return size_t{1} << 20; }
  bool handles_are_bytes() const override { return true; }  // no handle sockets
  void* reserve(size_t bytes) override {
    void* p = mmap(nullptr, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) SYMCOMM_THROW(symcommSystemError, "mmap(%zu bytes) failed", bytes);
    return p;
  }
  void unreserve(void* base, size_t bytes) override { munmap(base, bytes); }
  uint64_t create(size_t) override { SYMCOMM_THROW(symcommNotSupported, "no heap growth here"); }
  void destroy(uint64_t) override {}
  void map(void*, size_t, uint64_t) override {}
  SharedHandle share(uint64_t) override { return {}; }
  void map_peer(void*, size_t, const SharedHandle&) override {}
  void unmap(void*, size_t) override {}
  SharedHandle share_buffer(const void*, size_t, size_t* offset) override {
    *offset = 0;
    return {};
  }
};

class RegistrationRanges : public OneRankMemory<ShareAnything> {
 protected:
  // The code add() fails with, and its message in `why`; symcommSuccess if it registers.
  symcommResult_t add(void* p, size_t bytes, std::string* why) {
    try {
      registrations_->add(p, bytes);
      return symcommSuccess;
    } catch (const Error& e) {
      *why = e.what();
      return e.code();
    }
  }
};

TEST_F(RegistrationRanges, HugeSizesDoNotWrap) {
  std::vector<char> memory(3 * 4096);
  char* p = memory.data() + 4096;
  const Registration* r = registrations_->add(p, 4096);
  EXPECT_EQ(registrations_->find(p, 4096), r);
  EXPECT_EQ(registrations_->find(p + 100, 3996), r);
  EXPECT_EQ(registrations_->find(p + 100, 3997), nullptr);
  EXPECT_EQ(registrations_->find(p + 4095, 0), r);
  EXPECT_EQ(registrations_->find(p + 4096, 0), nullptr);
  EXPECT_EQ(registrations_->find(p - 1, 2), nullptr);
  // Ends that wrap to just past p.
  EXPECT_EQ(registrations_->find(p, SIZE_MAX), nullptr);
  EXPECT_EQ(registrations_->find(p + 16, SIZE_MAX - 8), nullptr);
  EXPECT_EQ(registrations_->peer_ptr(p + 16, 0), p + 16);

  // Ranges from below and from inside the registration, whose ends wrap.
  std::string why;
  EXPECT_EQ(add(p - 16, SIZE_MAX, &why), symcommInvalidArgument);
  EXPECT_NE(why.find("overlaps the registered buffer"), std::string::npos) << why;
  why.clear();
  EXPECT_EQ(add(p + 16, SIZE_MAX - 16, &why), symcommInvalidArgument);
  EXPECT_NE(why.find("overlaps the registered buffer"), std::string::npos) << why;
  // Neighbours that touch it without overlapping register.
  EXPECT_EQ(add(p - 4096, 4096, &why), symcommSuccess) << why;
  EXPECT_EQ(add(p + 4096, 4096, &why), symcommSuccess) << why;
}

}  // namespace
}  // namespace symcomm
