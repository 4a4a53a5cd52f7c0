// peer_address (memory/peer_address.h) on one rank: a heap address, an address in a
// registered buffer, one in neither, and ranks out of range. The translation to other
// ranks' mappings is exercised through symcommPtr, which calls it, by mp_heap and
// mp_register (every rank reads every peer's data there, and a peer that is not mapped
// gives NULL with its reason).
#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "base/error.h"
#include "memory/heap.h"
#include "memory/peer_address.h"
#include "memory/registration.h"
#include "one_rank_memory.h"

namespace symcomm {
namespace {

// The host space, which also shares the buffers a process allocated itself (one rank opens
// none of them): a heap that grows, and buffers that register.
class HostSharingBuffers final : public Space {
 public:
  symcommMemorySpace_t kind() const override { return host_->kind(); }
  const char* name() const override { return "host-sharing-buffers"; }
  size_t granularity() const override { return host_->granularity(); }
  size_t default_max_bytes() const override { return host_->default_max_bytes(); }
  size_t default_chunk_bytes() const override { return host_->default_chunk_bytes(); }
  bool handles_are_bytes() const override { return host_->handles_are_bytes(); }
  void* reserve(size_t bytes) override { return host_->reserve(bytes); }
  void unreserve(void* base, size_t bytes) override { host_->unreserve(base, bytes); }
  uint64_t create(size_t bytes) override { return host_->create(bytes); }
  void destroy(uint64_t handle) override { host_->destroy(handle); }
  void map(void* addr, size_t bytes, uint64_t handle) override { host_->map(addr, bytes, handle); }
  SharedHandle share(uint64_t handle) override { return host_->share(handle); }
  void map_peer(void* addr, size_t bytes, const SharedHandle& handle) override {
    host_->map_peer(addr, bytes, handle);
  }
  void unmap(void* addr, size_t bytes) override { host_->unmap(addr, bytes); }
  SharedHandle share_buffer(const void*, size_t, size_t* offset) override {
    *offset = 0;
    return {};
  }

 private:
  std::unique_ptr<Space> host_ = make_host_space();
};

class PeerAddress : public OneRankMemory<HostSharingBuffers> {
 protected:
  // The code peer_address throws with (its message in `why`), or symcommSuccess.
  symcommResult_t fails(const Registrations* r, const void* p, int pe, std::string* why) {
    try {
      peer_address(*heap_, r, p, pe);
      return symcommSuccess;
    } catch (const Error& e) {
      *why = e.what();
      return e.code();
    }
  }
};

TEST_F(PeerAddress, HeapAddress) {
  char* p = static_cast<char*>(heap_->malloc(4096));
  const Registrations* r = registrations_.get();
  EXPECT_EQ(peer_address(*heap_, r, p, 0), p);
  EXPECT_EQ(peer_address(*heap_, r, p + 123, 0), p + 123);
  EXPECT_EQ(peer_address(*heap_, nullptr, p + 123, 0), p + 123);  // no registrations needed
  std::string why;
  EXPECT_EQ(fails(r, p, 1, &why), symcommInvalidArgument);
  EXPECT_NE(why.find("pe 1 is out of range [0, 1)"), std::string::npos) << why;
  EXPECT_EQ(fails(r, p, -1, &why), symcommInvalidArgument);
  EXPECT_NE(why.find("pe -1 is out of range [0, 1)"), std::string::npos) << why;
  heap_->free(p);
}

TEST_F(PeerAddress, RegisteredBuffer) {
  std::vector<char> buffer(8192);
  char* b = buffer.data();
  const Registration* reg = registrations_->add(b, buffer.size());
  const Registrations* r = registrations_.get();
  EXPECT_EQ(peer_address(*heap_, r, b, 0), b);
  EXPECT_EQ(peer_address(*heap_, r, b + 8191, 0), b + 8191);
  std::string why;
  EXPECT_EQ(fails(r, b + 5, 1, &why), symcommInvalidArgument);
  EXPECT_NE(why.find("pe 1 is out of range [0, 1)"), std::string::npos) << why;
  EXPECT_EQ(fails(r, b + 5, -1, &why), symcommInvalidArgument);
  EXPECT_NE(why.find("pe -1 is out of range [0, 1)"), std::string::npos) << why;
  // Without the registrations (the decomposition's symmetric-only addresses) it is neither.
  EXPECT_EQ(fails(nullptr, b + 5, 0, &why), symcommInvalidArgument);
  EXPECT_NE(why.find("not in the symmetric heap"), std::string::npos) << why;
  // Just past the buffer, and after deregistration: neither.
  EXPECT_EQ(fails(r, b + 8192, 0, &why), symcommInvalidArgument);
  EXPECT_NE(why.find("not in the symmetric heap"), std::string::npos) << why;
  registrations_->remove(reg);
  EXPECT_EQ(fails(r, b, 0, &why), symcommInvalidArgument);
  EXPECT_NE(why.find("not in the symmetric heap"), std::string::npos) << why;
}

TEST_F(PeerAddress, NeitherHeapNorRegistered) {
  int local = 0;
  const Registrations* r = registrations_.get();
  std::string why;
  EXPECT_EQ(fails(r, &local, 0, &why), symcommInvalidArgument);
  EXPECT_NE(why.find("not in the symmetric heap"), std::string::npos) << why;
  EXPECT_EQ(fails(r, nullptr, 0, &why), symcommInvalidArgument);
  EXPECT_NE(why.find("not in the symmetric heap"), std::string::npos) << why;
  // A rank out of range is named first, whatever the address.
  EXPECT_EQ(fails(r, &local, 3, &why), symcommInvalidArgument);
  EXPECT_NE(why.find("pe 3 is out of range [0, 1)"), std::string::npos) << why;
}

}  // namespace
}  // namespace symcomm
