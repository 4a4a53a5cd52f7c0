// GPU memory over a network that cannot address it (no FI_HMEM): staged through pinned host
// memory. Each rank has an inbox registered with the domain, kSlots slots for each rank of
// another node, and an outbox of kSlots slots of its own.
//
// A put goes in chunks. A copy engine copies a chunk into an outbox slot behind a header
// (the heap offset it goes to, its size, the request's ticket); one write with immediate data
// carries both into the target's inbox slot for this rank; the target's proxy, seeing it
// land, starts the chunk's copy into its heap and replies once the copy completed (poll).
// The put is done when every chunk's reply came; up to kSlots chunks are in flight, so that
// the copies overlap the network.
// A get asks the target to stage each chunk in that slot (a Stage message, answered once
// copied), reads it from there into the outbox and copies it out.
//
// Over several lanes to the target (rail_set.h; staging_lanes.cc), a chunk's write into the
// inbox slot goes through LaneTransfers (striped by rate, failed over), as a plain write: the
// rxm provider crashes where a connection closes under a write with immediate data. Once the
// write completed (delivery complete: it is in the target's inbox), a Landed message
// (numbered: applied once, however the lanes fail) asks the target to copy it into its heap,
// and its reply frees the slot; 2 chunks are in flight (staging_lanes.cc says why). A get's
// Stage goes as a message there too, and its read through LaneTransfers.
//
// A put may leave its last chunks in flight (`keep_in_flight`: the cuda space's stream
// puts, and the staged host space's nbi puts, which is how CPUs test this): it returns
// once every chunk has been copied into the outbox and posted, so that the next put's copies
// overlap its writes, as raw writes keep several in flight. Whatever goes
// to a rank after it (a message, a get, a quiet: complete()) first waits for that rank's
// chunks to have landed, and a slot is reused only once its chunk landed.
//
// Only the stream worker (stream_jobs.h) calls put, get and complete, one job at a time: the
// slots are its own. In the host space the calling threads take turns, and each call first
// completes what is in flight. The handlers run on the proxy thread.
#pragma once

#include <atomic>
#include <chrono>
#include <deque>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "base/cuda_runtime_check.h"
#include "topology/topology.h"
#include "transport/net/endpoint.h"
#include "transport/net/gpu_landing.h"
#include "transport/net/copy_context.h"
#include "transport/net/local_memory.h"
#include "transport/net/proxy.h"
#include "transport/net/rail_set.h"
#include "transport/net/rail_transfer.h"
#include "transport/net/wire.h"

namespace symcomm {

class Staging {
 public:
  static constexpr int kSlots = 4;
  // Collective (registers the inbox). `chunk`: payload bytes of a slot.
  // `context`: where its copies run (copy_context.h); null: the host space's heap, moved by
  // memcpy (SYMCOMM_NET_STAGE_HOST: the staging protocol tested on CPUs).
  Staging(RailSet& rails, const Topology& topology, const CopyContext* context,
          size_t chunk, int64_t timeout_ms);
  ~Staging();

  // This rank's heap and how much of it peers may address (the proxy's view).
  void set_heap(char* base, const std::atomic<size_t>* mapped) { heap_ = base, mapped_ = mapped; }

  // What put and get use where there are several lanes to the target: the transfers, and
  // the transport's messages (lane_messages.h) and holds (wire::Kind::Hold).
  struct Lanes {
    LaneTransfers& transfers;
    std::function<uint64_t(int pe, const wire::Header& h, const char* what, bool reply)> send;
    std::function<void(int pe, size_t bytes)> hold;
  };
  // The ways to a target, set once before any put or get: `proxy` (rail 0's) where one lane
  // reaches it, `lanes` where several do.
  void set_ways(Proxy& proxy, std::unique_ptr<Lanes> lanes) {
    proxy_ = &proxy, lanes_ = std::move(lanes);
  }

  // `bytes` from `src` (any memory this GPU reaches) to heap offset `offset` of rank `pe`.
  // `keep_in_flight` (one lane to pe): returns once `src` was read (every chunk copied into
  // the outbox and posted); else once every chunk landed.
  void put(int pe, size_t offset, const void* src, size_t bytes, bool keep_in_flight = false);
  // `bytes` at heap offset `offset` of rank `pe` to `dst` (any memory this GPU reaches).
  void get(int pe, void* dst, size_t offset, size_t bytes);
  // Waits until the chunks left in flight to rank `pe` (every rank: -1) have landed; throws
  // the first failure among them (each is waited for once). In the host space for every
  // rank's: there any call completes what is in flight (symcommPutNbiOnStream).
  void complete(int pe);

  // Whether a write's immediate data is a staged chunk's.
  static bool is_staged(uint64_t data) { return (data & kStagedFlag) != 0; }
  // Proxy thread: a chunk landed in this rank's inbox; starts its copy into the heap. The
  // reply goes once the copy completed (poll), so that the proxy goes on receiving while the
  // copy runs: a landing waited for on the proxy thread held the network for that long, each
  // chunk (27.6 us from arrival to reply for 64 KiB, 119.0 us for 1 MiB, one H200 as 2 nodes:
  // bench/results/h200x1/net_trace_1m_6fba7b9.txt).
  void on_landed(Proxy& proxy, uint64_t data, LocalMemory& memory);
  // Proxy thread, every pass (Proxy::Poll): replies to the chunks whose copies completed, in
  // the order they landed. Returns whether copies still run. Throws symcommTimeout where one
  // has run for SYMCOMM_WAIT_TIMEOUT.
  bool poll(Proxy& proxy);
  // Proxy thread: a Stage request; copies the heap range into the requester's inbox slot.
  // Returns the reply's value (0, or 1 where the request was out of range).
  uint64_t on_stage(const wire::Header& h, LocalMemory& memory);
  // Proxy thread: a Landed message; copies the sender's inbox slot into the heap. Returns the
  // reply's value (0, or 1 where it was out of range).
  uint64_t on_landed_message(const wire::Header& h, LocalMemory& memory);

 private:
  static constexpr uint64_t kStagedFlag = uint64_t{1} << 31;
  static constexpr size_t kHeader = 64;
  struct SlotHeader {
    uint64_t offset, bytes, ticket;
  };
  size_t slot_bytes() const { return kHeader + chunk_; }
  // Of `target`'s inbox: where the slots of `source` begin.
  size_t inbox_offset(int target, int source, int slot) const;
  char* inbox_slot(int source, int slot) const { return inbox_ + inbox_offset(rank_, source, slot); }
  char* outbox_slot(int slot) const { return outbox_ + static_cast<size_t>(slot) * slot_bytes(); }
  bool in_heap(uint64_t offset, uint64_t bytes) const;
  // Waits for the ops in flight before an error leaves (the slots are not reused under them).
  void drain(Proxy& proxy, std::shared_ptr<NetOp>* ops, size_t count);
  // Waits for slot s's chunk to have landed (its reply), frees the slot; throws its failure.
  void finish_slot(int s);
  // put, get and complete over one lane (through proxy_) and over several (lanes_).
  void put(Proxy& proxy, int pe, size_t offset, const void* src, size_t bytes,
           bool keep_in_flight);
  void get(Proxy& proxy, int pe, void* dst, size_t offset, size_t bytes);
  void put(const Lanes& lanes, int pe, size_t offset, const void* src, size_t bytes);
  void get(const Lanes& lanes, int pe, void* dst, size_t offset, size_t bytes);
  void complete_slots(int pe);
  // The host space's turn (held for the call; recursive: a call over several lanes sends
  // messages, which complete what is in flight); nothing in the cuda space.
  std::unique_lock<std::recursive_mutex> turn();

  // Copies `piece` bytes of `src` into outbox slot `slot`, behind its header (offset, bytes,
  // ticket), and waits for the copy.
  void fill_slot(int slot, size_t offset, const void* src, size_t piece, uint64_t ticket);
  // Copies `piece` bytes out of outbox slot `slot` to `dst` (GPU memory where `to_gpu`:
  // land_on_gpu), on the worker's streams; the caller syncs them.
  void empty_slot(int slot, void* dst, size_t piece, bool to_gpu);
  bool on_gpu(const void* p) const;
  // Copies `bytes` of `source`'s inbox slot `slot` to heap offset `offset` (proxy thread).
  // Returns 0, or 1 where the range is not in the heap.
  uint64_t land_slot(int source, int slot, uint64_t offset, uint64_t bytes, LocalMemory& memory);

  // The worker's CUDA context for a scope (the cuda space); nothing on the host.
  class WorkerScope {
   public:
    explicit WorkerScope(const CopyContext* context) {
      if (context) scope_.emplace(context->get(), context->device());
    }

   private:
    std::optional<ContextScope> scope_;
  };
  // Waits for the worker's copies out of the outbox (the cuda space's streams).
  void sync_copies();

  RailSet& rails_;  // the single-lane path uses rail 0's endpoint
  FabricEndpoint& ep_;
  const Topology& topology_;
  int rank_;
  const CopyContext* context_;  // null: host memory
  int device_;
  size_t chunk_;
  int64_t timeout_ms_;
  char* inbox_ = nullptr;   // pinned (portable; host memory without a context), registered
                            // at kStagingOffset
  char* outbox_ = nullptr;  // likewise, not registered
  std::unique_ptr<LandingStreams> streams_;  // the worker's copies (of context_; none without)
  void* stream_ = nullptr;                    // streams_->engine()
  // The proxy thread's: its landings of chunks into GPU memory (of context_), and those
  // begun and not yet replied to, oldest first (the host space's land in on_landed).
  std::unique_ptr<LandingStreams> proxy_streams_;
  struct Landing {
    void* event;  // a cudaEvent_t recorded after the copy
    int source;
    uint64_t ticket;
    std::chrono::steady_clock::time_point since;
  };
  std::deque<Landing> landings_;
  std::vector<void*> spare_events_;
  char* heap_ = nullptr;
  const std::atomic<size_t>* mapped_ = nullptr;
  // The single-lane put's chunks not yet landed, by outbox slot (the ranks they go to, and
  // the proxy that carries them), and the slot the next chunk takes.
  std::shared_ptr<NetOp> slot_op_[kSlots];
  int slot_pe_[kSlots] = {};
  int next_slot_ = 0;
  Proxy* proxy_ = nullptr;
  std::unique_ptr<Lanes> lanes_;
  std::recursive_mutex turn_;  // the host space's calls
};

// Where the inbox appears among the endpoint's registered regions (beyond any heap offset).
constexpr size_t kStagingOffset = size_t{1} << 62;

}  // namespace symcomm
