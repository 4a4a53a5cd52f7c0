// What a peer's message does to this rank's memory: the net transport's proxy thread hands
// each message here once the lanes' windows (lane_messages.h) let it through, in the order it
// was sent. A put-signal lands its payload, then its signal; a signal updates its word; a
// fetch-add or compare-swap (host space) answers with the word's value before; a stage
// request (cuda space) copies GPU memory out to the staging inbox; a hold keeps the proxy
// polling; a disconnect closes a lane's end. Offsets beyond what this rank has mapped are
// ignored (answered 0): a peer's heap may have grown first.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "transport/net/local_memory.h"
#include "transport/net/proxy.h"
#include "transport/net/proxy_loop.h"
#include "transport/net/rail_transfer.h"
#include "transport/net/staging.h"
#include "transport/net/wire.h"

namespace symcomm {

class MessageApply {
 public:
  // `heap`: this rank's heap base; `mapped`: how far it is mapped (grows); `staging`: the cuda
  // space's, else NULL. All outlive this.
  MessageApply(char* heap, const std::atomic<size_t>& mapped, LocalMemory& memory,
               Staging* staging, ProxyLoop& loop, LaneTransfers& transfers)
      : heap_(heap), mapped_(mapped), memory_(memory), staging_(staging), loop_(loop),
        transfers_(transfers) {}
  // The message `h` (with its payload), arrived at `via`: applied; the reply's value.
  uint64_t operator()(Proxy& via, const wire::Header& h, const uint8_t* payload);

 private:
  char* heap_;
  const std::atomic<size_t>& mapped_;
  LocalMemory& memory_;
  Staging* staging_;
  ProxyLoop& loop_;
  LaneTransfers& transfers_;
};

}  // namespace symcomm
