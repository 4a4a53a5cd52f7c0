#include "transport/net/staging.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <exception>

#include "base/cuda_driver.h"
#include "base/cuda_runtime_check.h"
#include "base/log.h"
#include "transport/net/gpu_landing.h"
#include "transport/trace.h"

namespace symcomm {

namespace {

cudaStream_t as_stream(void* s) { return static_cast<cudaStream_t>(s); }

}  // namespace

Staging::Staging(RailSet& rails, const Topology& topology, const CopyContext* context,
                 size_t chunk, int64_t timeout_ms)
    : rails_(rails), ep_(rails.rail(0)), topology_(topology), rank_(topology.rank),
      context_(context), device_(context ? context->device() : -1), chunk_(chunk),
      timeout_ms_(timeout_ms) {
  SYMCOMM_REQUIRE(ep_.cq_data_size() >= 4, symcommNotSupported,
                  "the net transport stages GPU memory with writes that carry 4 bytes of "
                  "immediate data; this provider carries %zu", ep_.cq_data_size());
  SYMCOMM_REQUIRE(topology.nranks < (1 << 26), symcommNotSupported,
                  "the net transport's staging numbers ranks in 26 bits (%d ranks)",
                  topology.nranks);
  const size_t remote_ranks = static_cast<size_t>(std::count_if(
      topology.node_of.begin(), topology.node_of.end(), [&](int n) { return n != topology.node; }));
  const size_t inbox_bytes = std::max<size_t>(remote_ranks, 1) * kSlots * slot_bytes();
  if (context_) {
    WorkerScope guard(context_);
    void* p = nullptr;
    SYMCOMM_CUDART(cudaHostAlloc(&p, inbox_bytes, cudaHostAllocPortable));
    inbox_ = static_cast<char*>(p);
    SYMCOMM_CUDART(cudaHostAlloc(&p, kSlots * slot_bytes(), cudaHostAllocPortable));
    outbox_ = static_cast<char*>(p);
    streams_ = std::make_unique<LandingStreams>();
    stream_ = streams_->engine();
    proxy_streams_ = std::make_unique<LandingStreams>();
  } else {
    inbox_ = new char[inbox_bytes];
    outbox_ = new char[kSlots * slot_bytes()];
  }
  rails_.register_heap_range(inbox_, kStagingOffset, inbox_bytes);
}

Staging::~Staging() {
  if (!context_) {
    delete[] inbox_;
    delete[] outbox_;
    return;
  }
  try {
    WorkerScope guard(context_);  // the streams' and events'
    if (proxy_streams_) proxy_streams_->sync(timeout_ms_);
    for (const Landing& l : landings_)
      static_cast<void>(cudaEventDestroy(static_cast<cudaEvent_t>(l.event)));
    for (void* e : spare_events_) static_cast<void>(cudaEventDestroy(static_cast<cudaEvent_t>(e)));
    proxy_streams_.reset();
    streams_.reset();
    for (cudaError_t e : {cudaFreeHost(inbox_), cudaFreeHost(outbox_)})
      if (e != cudaSuccess)
        SYMCOMM_WARN("freeing the net transport's staging: %s", cudaGetErrorString(e));
  } catch (const Error& e) {
    SYMCOMM_WARN("freeing the net transport's staging: %s", e.what());
  }
}

size_t Staging::inbox_offset(int target, int source, int slot) const {
  // The source's index among the ranks not on the target's node.
  const int target_node = topology_.node_of[static_cast<size_t>(target)];
  size_t index = 0;
  for (int r = 0; r < source; ++r)
    index += topology_.node_of[static_cast<size_t>(r)] != target_node;
  return (index * kSlots + static_cast<size_t>(slot)) * slot_bytes();
}

bool Staging::in_heap(uint64_t offset, uint64_t bytes) const {
  return bytes <= chunk_ && offset <= mapped_->load() && bytes <= mapped_->load() - offset;
}

void Staging::drain(Proxy& proxy, std::shared_ptr<NetOp>* ops, size_t count) {
  for (size_t i = 0; i < count; ++i)
    if (ops[i]) {
      try {
        proxy.wait(*ops[i], timeout_ms_, "a staged transfer");
      } catch (const Error&) {
      }
      ops[i].reset();
    }
}

void Staging::fill_slot(int slot, size_t offset, const void* src, size_t piece,
                        uint64_t ticket) {
  char* at = outbox_slot(slot);
  const SlotHeader h{offset, piece, ticket};
  std::memcpy(at, &h, sizeof h);
  if (!context_) {
    std::memcpy(at + kHeader, src, piece);
    return;
  }
  SYMCOMM_CUDART(
      cudaMemcpyAsync(at + kHeader, src, piece, cudaMemcpyDefault, as_stream(stream_)));
  sync_within(stream_, timeout_ms_);
}

void Staging::sync_copies() {
  if (streams_) streams_->sync(timeout_ms_);
}

std::unique_lock<std::recursive_mutex> Staging::turn() {
  std::unique_lock<std::recursive_mutex> turn(turn_, std::defer_lock);
  if (!context_) turn.lock();
  return turn;
}

void Staging::put(int pe, size_t offset, const void* src, size_t bytes, bool keep_in_flight) {
  const auto held = turn();
  if (!context_) complete_slots(-1);
  if (rails_.lanes(pe).size() > 1) return put(*lanes_, pe, offset, src, bytes);
  put(*proxy_, pe, offset, src, bytes, keep_in_flight);
}

void Staging::get(int pe, void* dst, size_t offset, size_t bytes) {
  const auto held = turn();
  if (rails_.lanes(pe).size() > 1) return get(*lanes_, pe, dst, offset, bytes);
  get(*proxy_, pe, dst, offset, bytes);
}

void Staging::complete(int pe) {
  const auto held = turn();
  complete_slots(context_ ? pe : -1);
}

void Staging::finish_slot(int s) {
  std::shared_ptr<NetOp> op = std::move(slot_op_[s]);
  slot_op_[s].reset();
  if (!op) return;
  proxy_->wait(*op, timeout_ms_, "a put");
  SYMCOMM_REQUIRE(op->reply == 0, symcommInternalError,
                  "rank %d refused a staged chunk of a put (heap offset out of range)",
                  slot_pe_[s]);
}

void Staging::complete_slots(int pe) {
  // Every slot is waited for, also after a failure: the first failure is thrown at the end.
  std::exception_ptr failed;
  for (int s = 0; s < kSlots; ++s) {
    if (!slot_op_[s] || (pe >= 0 && slot_pe_[s] != pe)) continue;
    try {
      finish_slot(s);
    } catch (...) {
      if (!failed) failed = std::current_exception();
    }
  }
  if (failed) std::rethrow_exception(failed);
}

void Staging::put(Proxy& proxy, int pe, size_t offset, const void* src, size_t bytes,
                  bool keep_in_flight) {
  WorkerScope guard(context_);
  try {
    for (size_t done = 0; done < bytes;) {
      const size_t piece = std::min(chunk_, bytes - done);
      const int s = next_slot_;
      next_slot_ = (next_slot_ + 1) % kSlots;
      {
        trace::Scope t("staged put: slot's last chunk landed");
        finish_slot(s);  // its chunk (of any rank) landed: the slot may be filled again
      }
      char* slot = outbox_slot(s);
      auto op = std::make_shared<NetOp>();
      op->type = NetOp::Type::Write;
      op->pe = pe;
      op->expects_reply = true;
      {
        trace::Scope t("staged put: copied into the outbox");
        fill_slot(s, offset + done, static_cast<const char*>(src) + done, piece,
                  reinterpret_cast<uint64_t>(op.get()));
      }
      RemoteRange r =
          rails_.remote(pe, 0, kStagingOffset + inbox_offset(pe, rank_, s), kHeader + piece);
      const uint64_t data = kStagedFlag | (static_cast<uint64_t>(rank_) << 4) | static_cast<uint64_t>(s);
      op->parts.push_back(Posted{{}, op.get(), slot, kHeader + piece, r.addr, r.key, data});
      op->outstanding = 2;  // the write, and the target's reply once it copied the chunk
      proxy.submit(op);
      slot_op_[s] = std::move(op);
      slot_pe_[s] = pe;
      done += piece;
    }
    if (!keep_in_flight) complete_slots(pe);
  } catch (...) {
    drain(proxy, slot_op_, kSlots);  // nothing is left in flight under the failure
    throw;
  }
}

bool Staging::on_gpu(const void* p) const {
  if (!context_) return false;
  cudaPointerAttributes attr{};
  const bool gpu =
      cudaPointerGetAttributes(&attr, p) == cudaSuccess && attr.type == cudaMemoryTypeDevice;
  static_cast<void>(cudaGetLastError());
  return gpu;
}

void Staging::empty_slot(int slot, void* dst, size_t piece, bool to_gpu) {
  // GPU memory is written by land_on_gpu; a host buffer by a copy. The caller syncs.
  if (!context_) {
    std::memcpy(dst, outbox_slot(slot) + kHeader, piece);
  } else if (to_gpu) {
    streams_->land(cuda_driver(), dst, outbox_slot(slot) + kHeader, piece);
  } else {
    SYMCOMM_CUDART(cudaMemcpyAsync(dst, outbox_slot(slot) + kHeader, piece, cudaMemcpyDefault,
                                   as_stream(stream_)));
  }
}

void Staging::get(Proxy& proxy, int pe, void* dst, size_t offset, size_t bytes) {
  complete_slots(-1);  // the slots, from the first, are this get's
  WorkerScope guard(context_);
  std::vector<std::shared_ptr<NetOp>> pending(kSlots);
  const bool to_gpu = on_gpu(dst);
  try {
    for (size_t done = 0; done < bytes;) {
      // Up to kSlots chunks at a time: the target stages them, this rank reads them, copies
      // them out.
      size_t pieces[kSlots] = {};
      int n = 0;
      for (size_t at = done; n < kSlots && at < bytes; ++n) {
        pieces[n] = std::min(chunk_, bytes - at);
        auto op = std::make_shared<NetOp>();
        op->type = NetOp::Type::Send;
        op->pe = pe;
        op->expects_reply = true;
        op->outstanding = 2;
        wire::Header h{};
        h.kind = wire::Kind::Stage;
        h.from = rank_;
        h.offset = offset + at;
        h.b = pieces[n];
        h.a = static_cast<uint64_t>(n);
        h.ticket = reinterpret_cast<uint64_t>(op.get());
        op->message.resize(sizeof h);
        std::memcpy(op->message.data(), &h, sizeof h);
        op->parts.resize(1);
        op->parts[0].op = op.get();
        proxy.submit(op);
        pending[static_cast<size_t>(n)] = std::move(op);
        at += pieces[n];
      }
      for (int s = 0; s < n; ++s) {
        auto& op = pending[static_cast<size_t>(s)];
        proxy.wait(*op, timeout_ms_, "a get");
        SYMCOMM_REQUIRE(op->reply == 0, symcommInternalError,
                        "rank %d refused to stage a chunk of a get (heap offset out of range)", pe);
        // The staged chunk, read into the outbox slot of the same number.
        RemoteRange r = rails_.remote(
            pe, 0, kStagingOffset + inbox_offset(pe, rank_, s) + kHeader, pieces[s]);
        auto read = std::make_shared<NetOp>();
        read->type = NetOp::Type::Read;
        read->pe = pe;
        read->parts.push_back(
            Posted{{}, read.get(), outbox_slot(s) + kHeader, pieces[s], r.addr, r.key, 0});
        read->outstanding = 1;
        proxy.submit(read);
        op = std::move(read);
      }
      for (int s = 0; s < n; ++s) {
        auto& op = pending[static_cast<size_t>(s)];
        proxy.wait(*op, timeout_ms_, "a get");
        op.reset();
        empty_slot(s, static_cast<char*>(dst) + done, pieces[s], to_gpu);
        done += pieces[s];
      }
      sync_copies();
    }
  } catch (...) {
    drain(proxy, pending.data(), pending.size());
    throw;
  }
}

void Staging::on_landed(Proxy& proxy, uint64_t data, LocalMemory& memory) {
  const int source = static_cast<int>((data & (kStagedFlag - 1)) >> 4);
  const int s = static_cast<int>(data & 0xf);
  if (source >= topology_.nranks || s >= kSlots) {
    SYMCOMM_WARN("net transport: a staged chunk names rank %d, slot %d; dropped", source, s);
    return;
  }
  if (trace::enabled()) {
    const double gap = trace::since("staged chunk arrived");
    if (gap >= 0) trace::add("staged chunk arrived -> next", gap);
    trace::mark("staged chunk arrived");
  }
  SlotHeader h;
  std::memcpy(&h, inbox_slot(source, s), sizeof h);
  // One lane: the replies go to rail 0, after those of the chunks that landed before. The
  // host space's copy is done here, as are the refusals (land_slot says why).
  if (!context_ || !in_heap(h.offset, h.bytes))
    return proxy.reply(source, 0, h.ticket,
                       Proxy::Answer{land_slot(source, s, h.offset, h.bytes, memory)});
  WorkerScope guard(context_);
  proxy_streams_->land(cuda_driver(), heap_ + h.offset, inbox_slot(source, s) + kHeader,
                       h.bytes);
  cudaEvent_t event = nullptr;
  if (!spare_events_.empty()) {
    event = static_cast<cudaEvent_t>(spare_events_.back());
    spare_events_.pop_back();
  } else {
    SYMCOMM_CUDART(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  }
  void* stream = lands_on_engine(h.bytes) ? proxy_streams_->engine() : proxy_streams_->compute();
  SYMCOMM_CUDART(cudaEventRecord(event, as_stream(stream)));
  landings_.push_back(Landing{event, source, h.ticket, std::chrono::steady_clock::now()});
}

bool Staging::poll(Proxy& proxy) {
  while (!landings_.empty()) {
    Landing& l = landings_.front();
    WorkerScope guard(context_);
    const cudaError_t e = cudaEventQuery(static_cast<cudaEvent_t>(l.event));
    if (e == cudaErrorNotReady) {
      const auto ran = std::chrono::steady_clock::now() - l.since;
      SYMCOMM_REQUIRE(timeout_ms_ <= 0 || ran < std::chrono::milliseconds(timeout_ms_),
                      symcommTimeout,
                      "net transport: the copy of rank %d's staged chunk into GPU memory did "
                      "not end within SYMCOMM_WAIT_TIMEOUT (%lld ms)", l.source,
                      static_cast<long long>(timeout_ms_));
      return true;
    }
    SYMCOMM_CUDART(e);
    spare_events_.push_back(l.event);
    if (trace::enabled())
      trace::add("staged chunk landed", std::chrono::duration<double, std::micro>(
                                            std::chrono::steady_clock::now() - l.since).count());
    proxy.reply(l.source, 0, l.ticket, Proxy::Answer{0});
    landings_.pop_front();
  }
  return false;
}

uint64_t Staging::land_slot(int source, int slot, uint64_t offset, uint64_t bytes,
                            LocalMemory& memory) {
  if (!in_heap(offset, bytes)) {
    SYMCOMM_WARN("net transport: rank %d's staged chunk of %llu bytes at heap offset %llu is out "
                 "of range; refused", source, static_cast<unsigned long long>(bytes),
                 static_cast<unsigned long long>(offset));
    return 1;
  }
  memory.write(heap_ + offset, inbox_slot(source, slot) + kHeader, bytes);
  return 0;
}

uint64_t Staging::on_landed_message(const wire::Header& h, LocalMemory& memory) {
  if (h.from < 0 || h.from >= topology_.nranks || h.a >= kSlots) return 1;
  return land_slot(h.from, static_cast<int>(h.a), h.offset, h.b, memory);
}

uint64_t Staging::on_stage(const wire::Header& h, LocalMemory& memory) {
  if (h.from < 0 || h.from >= topology_.nranks || h.a >= kSlots || !in_heap(h.offset, h.b))
    return 1;
  memory.read(inbox_slot(h.from, static_cast<int>(h.a)) + kHeader, heap_ + h.offset, h.b);
  return 0;
}

}  // namespace symcomm
