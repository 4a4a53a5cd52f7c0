// The load/store transport: a peer whose memory is mapped here (the same GPU, a P2P peer
// GPU of the node, or shared host memory of the node) is reached by the memory space's own
// movers (copy engines, copy kernels, CPU copies) on its mapped address.
#include <atomic>

#include "memory/peer_address.h"
#include "transport/transport.h"

namespace symcomm {

namespace {

class Lsa final : public Transport {
 public:
  explicit Lsa(TransportContext& ctx)
      : heap_(ctx.heap), registrations_(ctx.registrations), mover_(ctx.mover), space_(ctx.space) {}
  const char* name() const override { return "lsa"; }
  bool load_store() const override { return true; }
  bool registered_buffers() const override { return true; }

  void put(int pe, void* dst, const void* src, size_t bytes, symcommEngine_t engine,
           symcommStream_t stream) override {
    mover_.put(at(dst, pe), src, bytes, engine, stream);
  }
  void get(int pe, void* dst, const void* src, size_t bytes, symcommEngine_t engine,
           symcommStream_t stream) override {
    mover_.get(dst, at(src, pe), bytes, engine, stream);
  }
  void signal(int pe, uint64_t* sig, uint64_t value, symcommSignalOp_t op,
              symcommStream_t stream) override {
    mover_.signal(reinterpret_cast<uint64_t*>(at(sig, pe)), value, op, stream);
  }
  uint64_t fetch_add(int pe, uint64_t* word, uint64_t value) override {
    return __atomic_fetch_add(host_word(word, pe), value, __ATOMIC_SEQ_CST);
  }
  uint64_t compare_swap(int pe, uint64_t* word, uint64_t expected, uint64_t desired) override {
    __atomic_compare_exchange_n(host_word(word, pe), &expected, desired, false, __ATOMIC_SEQ_CST,
                                __ATOMIC_SEQ_CST);
    return expected;
  }
  void atomic_on_stream(int pe, uint64_t* word, uint64_t operand, uint64_t desired,
                        bool compare_swap, uint64_t* result, symcommStream_t stream) override {
    mover_.atomic(reinterpret_cast<uint64_t*>(at(word, pe)), operand, desired, compare_swap,
                  result, stream);
  }
  void quiet(symcommStream_t) override {}  // rma's backend quiets its own stream work

 private:
  char* at(const void* sym, int pe) const {
    return peer_address(heap_, &registrations_, sym, pe);
  }
  uint64_t* host_word(uint64_t* word, int pe) const {
    SYMCOMM_REQUIRE(space_ == symcommSpaceHost, symcommNotSupported,
                    "host-side atomics on symmetric words need the host space (in the cuda "
                    "space, use the device API's atomics)");
    return reinterpret_cast<uint64_t*>(at(word, pe));
  }

  Heap& heap_;
  const Registrations& registrations_;
  LoadStoreMover& mover_;
  symcommMemorySpace_t space_;
};

class LsaKind final : public TransportKind {
 public:
  const char* name() const override { return "lsa"; }
  Verdict can_connect(const TransportContext& ctx, int pe) const override {
    if (ctx.topology.accessible[static_cast<size_t>(pe)]) return Verdict::yes();
    return Verdict::no(ctx.topology.why_inaccessible(pe));
  }
  std::unique_ptr<Transport> open(TransportContext& ctx, const std::vector<int>&) const override {
    return std::make_unique<Lsa>(ctx);
  }
};

const Registered<TransportKind, LsaKind> kRegistered(10);

}  // namespace

}  // namespace symcomm
