// The net transport: peers on other nodes, reached through libfabric by this rank's proxy
// (proxy.h) on one endpoint (endpoint.h). Writes and reads go straight between the
// registered heaps; signals, eager put-signals and atomics are messages that the target's
// proxy applies to its own memory, in the order they were sent (the endpoint's messages are
// ordered, FI_ORDER_SAS), after every write sent before them has landed (writes complete
// only once delivered, FI_DELIVERY_COMPLETE). In the host space each call completes before
// it returns, as the host space's load/store operations do (put_nbi and get_nbi leave theirs
// in flight until the next other call).
//
// In the cuda space the network cannot address GPU memory (no FI_HMEM is used): data is
// staged through pinned host memory (staging.h), and each call on a stream becomes a job
// that a worker runs when the stream reaches it, the stream waiting for its end
// (stream_jobs.h): the calling thread does not block, and the stream's order holds.
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "base/cuda_runtime_check.h"
#include "base/log.h"
#include "base/param.h"
#include "bootstrap/bootstrap.h"
#include "rma/wait.h"
#include "transport/device_ring.h"
#include "transport/net/copy_context.h"
#include "transport/net/lane_messages.h"
#include "transport/net/local_memory.h"
#include "transport/net/message_apply.h"
#include "transport/net/proxy.h"
#include "transport/net/rail_set.h"
#include "transport/net/rail_transfer.h"
#include "transport/net/staging.h"
#include "transport/net/stream_bounce.h"
#include "transport/stream_jobs.h"
#include "transport/trace.h"
#include "transport/transport.h"

namespace symcomm {

static const SizeParam kChunk(
    "SYMCOMM_NET_CHUNK_SIZE", "1M",
    "the net transport splits larger writes and reads into pieces of this size, all in flight "
    "at once", 4096, size_t{1} << 30);

static const SizeParam kEagerMax(
    "SYMCOMM_NET_EAGER_MAX", "8K",
    "put-signals up to this size go to a peer on another node as one message that its proxy "
    "applies; larger ones (all, at 0) as a put and a signal", 0, wire::kEagerMax);

static const SizeParam kDeviceInline(
    "SYMCOMM_NET_DEVICE_INLINE", "64",
    "a kernel's put-signal to a peer on another node of up to this many bytes (at most 64, "
    "and at most SYMCOMM_NET_EAGER_MAX) carries its payload in the GPU-to-proxy ring's "
    "descriptor and returns once handed over; 0: none does", 0, kDeviceNetInlineBytes);

static const BoolParam kConnectAtInit(
    "SYMCOMM_NET_CONNECT_AT_INIT", "1",
    "1: the net transport connects to every peer of another node when the communicator is "
    "made (a flush each, within SYMCOMM_BOOTSTRAP_TIMEOUT); 0: at the first message to each");

static const BoolParam kStageHost(
    "SYMCOMM_NET_STAGE_HOST", "0",
    "1 (tests): the host space stages its puts and gets through the staging inbox as the cuda "
    "space stages GPU memory (the heap unregistered, memcpy for the copies), so that the "
    "staging protocol, over one lane and over several, runs on CPUs");

static const BoolParam kCudaLanes(
    "SYMCOMM_NET_CUDA_LANES", "1",
    "1: the cuda space stages over every rail of SYMCOMM_NET_RAILS (staging_lanes.cc); 0: over "
    "the first rail only");

namespace {

// How long the proxy polls without sleeping after its last activity (Proxy). In the host
// space a thread that waits for a peer drives the endpoint itself. In the cuda space the
// GPU waits, and nobody but the proxy receives: a proxy that napped (up to 4 ms) between a
// round's messages held an 8-byte put-signal's one-way time on 2 GPUs as 2 nodes to 5.3 ms
// (3.5 ms once it polled through the round): it polls through a round of communication.
constexpr auto kBusyHost = std::chrono::microseconds(500);
constexpr auto kBusyCuda = std::chrono::microseconds(50000);

// A stream's bounce buffer (stream_bounce.h; at least a chunk): what a stream job moves at a
// time of a buffer outside the heap.
constexpr size_t kStreamBounceBytes = size_t{8} << 20;

class Net final : public Transport {
 public:
  Net(TransportContext& ctx)
      : heap_(ctx.heap), rank_(ctx.topology.rank), device_(ctx.topology.device),
        cuda_(ctx.space == symcommSpaceCuda), staged_(cuda_ || kStageHost.get()),
        timeout_ms_(wait_timeout_ms()),
        chunk_(kChunk.get()), eager_max_(kEagerMax.get()),
        dirty_(static_cast<size_t>(ctx.topology.nranks)) {
    std::vector<std::string> domains = net_rail_domains();
    // Every rank opens as many endpoints (each a collective). SYMCOMM_NET_CUDA_LANES=0 keeps
    // the cuda space's staging on the first rail.
    if (cuda_ && domains.size() > 1 && !kCudaLanes.get()) {
      SYMCOMM_WARN("net transport: the cuda memory space uses the first of its %zu rails (%s), "
                   "as SYMCOMM_NET_CUDA_LANES=0 asks", domains.size(), domains[0].c_str());
      domains.resize(1);
    }
    // Ranks may have different rail counts (lanes between them: rail_set.h).
    rail_set_ = std::make_unique<RailSet>(ctx.bootstrap, rank_, ctx.topology.nranks, domains);
    rails_.resize(rail_set_->size());
    // A peer's messages arrive on its lane 0: on this rank's rail pe mod L (rails/lanes.h).
    message_rails_.assign(rails_.size(), false);
    for (int pe = 0; pe < ctx.topology.nranks; ++pe)
      if (!ctx.topology.same_node(pe))
        message_rails_[static_cast<size_t>(pe) % rails_.size()] = true;
    for (size_t i = 0; i < rails_.size(); ++i) rails_[i].endpoint = &rail_set_->rail(i);
    endpoint_ = rails_[0].endpoint;
    end_.store(heap_.mapped());
    if (cuda_) {
      // GPU memory stays unregistered: peers' data comes through the staging inbox.
      copy_context_ = std::make_unique<CopyContext>(device_);
      memory_ = make_cuda_memory(*copy_context_, ctx.mover);
      staging_ = std::make_unique<Staging>(*rail_set_, ctx.topology, copy_context_.get(),
                                           chunk_, timeout_ms_);
      staging_->set_heap(heap_.base(), &end_);
      jobs_ = std::make_unique<StreamJobs>(device_, "net");
      bounce_ = std::make_unique<StreamBounce>(device_, heap_.base(),
                                               heap_.base() + heap_.max_bytes(),
                                               std::max(kStreamBounceBytes, chunk_),
                                               wire::kEagerMax);
    } else if (staged_) {  // SYMCOMM_NET_STAGE_HOST: the heap stays unregistered too
      memory_ = make_host_memory();
      staging_ = std::make_unique<Staging>(*rail_set_, ctx.topology, nullptr, chunk_,
                                           timeout_ms_);
      staging_->set_heap(heap_.base(), &end_);
    } else {
      memory_ = make_host_memory();
      rail_set_->register_heap_range(heap_.base(), 0, heap_.mapped());
    }
    ctx.heap.on_grow([this](char* base, size_t offset, size_t bytes) {
      // Mapped already: peers may write there as soon as any rank's malloc returns, which is
      // after every rank registered it (the registration's exchange).
      if (!staged_) rail_set_->register_heap_range(base, offset, bytes);
      end_.store(offset + bytes);
    });
    loop_ = std::make_unique<ProxyLoop>(cuda_ ? kBusyCuda : kBusyHost);
    for (size_t i = 0; i < rails_.size(); ++i) {
      Rail& r = rails_[i];
      r.proxy = std::make_unique<Proxy>(
          *r.endpoint, rank_, static_cast<int>(i),
          [this](Proxy& via, const wire::Header& h, const uint8_t* payload) {
            return messages_->receive(
                via, h, payload, [&](const wire::Header& e, const uint8_t* p) {
                  return (*apply_)(via, e, p);
                });
          },
          [this](Proxy& proxy, uint64_t data) {
            if (staging_ && Staging::is_staged(data)) staging_->on_landed(proxy, data, *memory_);
          },
          *loop_);
      loop_->add(r.proxy.get(), message_rails_[i]);
    }
    // The staged chunks' landings that end after their Landed (one lane: rail 0's).
    if (staging_)
      rails_[0].proxy->set_poll([this](Proxy& proxy) { return staging_->poll(proxy); });
    proxy_ = rails_[0].proxy.get();
    std::vector<Proxy*> proxies;
    for (Rail& r : rails_) proxies.push_back(r.proxy.get());
    transfers_ = std::make_unique<LaneTransfers>(*rail_set_, proxies, rank_, chunk_, timeout_ms_);
    messages_ = std::make_unique<LaneMessages>(*transfers_, *rail_set_, proxies, rank_,
                                               ctx.topology.nranks, timeout_ms_);
    apply_ = std::make_unique<MessageApply>(heap_.base(), end_, *memory_, staging_.get(),
                                            *loop_, *transfers_);
    if (staging_)
      staging_->set_ways(*proxy_, std::make_unique<Staging::Lanes>(Staging::Lanes{
          *transfers_,
          [this](int pe, const wire::Header& h, const char* what, bool reply) {
            return send(pe, h, nullptr, what, reply);
          },
          [this](int pe, size_t bytes) { hold(pe, bytes); }}));
    loop_->start();  // what arrives is applied through messages_
  }
  ~Net() override {
    // Jobs first (they use the proxies, and the ring's operations run there); then the
    // threads end, then the endpoints close
    // (nothing lands in the proxies' receive buffers or the staging inbox after that), then
    // the buffers go.
    jobs_.reset();
    try {  // a put_nbi or get_nbi nobody completed: done (or failed) before the proxies stop
      transfers_->finish_begun();
      if (staging_) staging_->complete(-1);  // staged chunks left in flight, likewise
    } catch (const std::exception& e) {
      SYMCOMM_WARN("a transfer in flight at finalize failed: %s", e.what());
    }
    loop_->stop();
    for (Rail& r : rails_) r.proxy->stop();
    rail_set_->close();
    staging_.reset();
    rails_.clear();
  }

  const char* name() const override { return "net"; }

  // Collective (every rank opens its net transport): a flush to every peer on every lane,
  // answered. The provider connects to a peer at the first message (tcp;ofi_rxm), which
  // takes both ranks' progress; made here, within the init's bound
  // (SYMCOMM_BOOTSTRAP_TIMEOUT), it no longer falls into a call's wait bounded by
  // SYMCOMM_WAIT_TIMEOUT: a first barrier across 4 nodes on a loaded 2-core machine overran
  // a bound of 150 ms (Rma.EveryComparisonAtItsEdges).
  void connect(const std::vector<int>& peers) {
    std::vector<std::pair<Proxy*, std::shared_ptr<NetOp>>> ops;
    for (int pe : peers) {
      if (pe == rank_) continue;
      for (const rails::Lane& lane : rail_set_->lanes(pe)) {
        Proxy* proxy = rails_[static_cast<size_t>(lane.local_rail)].proxy.get();
        ops.emplace_back(proxy, Proxy::message(pe, header(wire::Kind::Flush), nullptr, true,
                                               lane.remote_rail));
        proxy->submit(ops.back().second);
      }
    }
    for (auto& [proxy, op] : ops) proxy->wait(*op, bootstrap_timeout_ms(), "connecting");
  }

  void put(int pe, void* dst, const void* src, size_t bytes, symcommEngine_t,
           symcommStream_t stream) override {
    const size_t offset = heap_.offset_of(dst);
    if (cuda_) {
      // The stream's puts leave their last chunks in flight (staging.h): the next put's
      // copies overlap them; what goes to pe next waits for them.
      if (!bounce_->needed(src))
        return jobs_->enqueue(stream,
                              [=, this] { staging_->put(pe, offset, src, bytes, true); });
      // Piece by piece through the stream's bounce buffer (stream_bounce.h).
      char* b = bounce_->buffer(stream);
      for (size_t at = 0; at < bytes; at += bounce_->bytes()) {
        const size_t n = std::min(bounce_->bytes(), bytes - at);
        bounce_->copy(b, static_cast<const char*>(src) + at, n, stream);
        jobs_->enqueue(stream, [=, this] { staging_->put(pe, offset + at, b, n, true); });
      }
      return;
    }
    transfers_->finish_begun();
    if (staged_) return staging_->put(pe, offset, src, bytes);
    hold(pe, bytes);
    transfers_->run(NetOp::Type::Write, pe, offset, const_cast<void*>(src), bytes);
  }
  void get(int pe, void* dst, const void* src, size_t bytes, symcommEngine_t,
           symcommStream_t stream) override {
    const size_t offset = heap_.offset_of(src);
    if (cuda_) {
      if (!bounce_->needed(dst))
        return jobs_->enqueue(stream,
                              [=, this] { staging_->get(pe, dst, offset, bytes); });
      char* b = bounce_->buffer(stream);  // as put's
      for (size_t at = 0; at < bytes; at += bounce_->bytes()) {
        const size_t n = std::min(bounce_->bytes(), bytes - at);
        jobs_->enqueue(stream, [=, this] { staging_->get(pe, b, offset + at, n); });
        bounce_->copy(static_cast<char*>(dst) + at, b, n, stream);
      }
      return;
    }
    transfers_->finish_begun();
    if (staged_) return staging_->get(pe, dst, offset, bytes);
    hold(pe, bytes);
    transfers_->run(NetOp::Type::Read, pe, offset, dst, bytes);
  }
  // The host space: left in flight (LaneTransfers::begin), finished by the next other call.
  void put_nbi(int pe, void* dst, const void* src, size_t bytes, symcommEngine_t engine,
               symcommStream_t stream) override {
    if (cuda_) return put(pe, dst, src, bytes, engine, stream);
    // Staged (SYMCOMM_NET_STAGE_HOST): copied into the outbox at once, its chunks left in
    // flight as the cuda space's stream puts leave theirs (staging.h).
    if (staged_) return staging_->put(pe, heap_.offset_of(dst), src, bytes, true);
    hold(pe, bytes);
    transfers_->begin(NetOp::Type::Write, pe, heap_.offset_of(dst), const_cast<void*>(src),
                      bytes);
  }
  void get_nbi(int pe, void* dst, const void* src, size_t bytes, symcommEngine_t engine,
               symcommStream_t stream) override {
    if (staged_) return get(pe, dst, src, bytes, engine, stream);
    hold(pe, bytes);
    transfers_->begin(NetOp::Type::Read, pe, heap_.offset_of(src), dst, bytes);
  }
  void signal(int pe, uint64_t* sig, uint64_t value, symcommSignalOp_t op,
              symcommStream_t stream) override {
    const wire::Header h = signal_header(heap_.offset_of(sig), value, op);
    if (cuda_) return jobs_->enqueue(stream, [=, this] { send(pe, h, nullptr, "a signal"); });
    transfers_->finish_begun();
    send(pe, h, nullptr, "a signal");
  }
  void signal_if(int pe, uint64_t* sig, uint64_t value, symcommSignalOp_t op,
                 const uint64_t* condition, uint64_t when, symcommStream_t stream) override {
    const wire::Header h = signal_header(heap_.offset_of(sig), value, op);
    auto job = [=, this] {
      if (__atomic_load_n(condition, __ATOMIC_ACQUIRE) != when) return;
      send(pe, h, nullptr, "a signal");
      send(pe, header(wire::Kind::Flush), nullptr, "a quiet", true);  // applied there
    };
    if (cuda_) return jobs_->enqueue(stream, job);
    job();
  }
  void put_signal(int pe, void* dst, const void* src, size_t bytes, uint64_t* sig,
                  uint64_t value, symcommSignalOp_t op, symcommEngine_t engine,
                  symcommStream_t stream) override {
    if (bytes == 0 || bytes > eager_max_) {
      if (bytes) put(pe, dst, src, bytes, engine, stream);
      signal(pe, sig, value, op, stream);
      return;
    }
    // One message: the target's proxy copies the payload, then applies the signal.
    wire::Header h = header(wire::Kind::PutSignal);
    h.offset = heap_.offset_of(dst);
    h.bytes = static_cast<uint32_t>(bytes);
    h.word = heap_.offset_of(sig);
    h.a = value;
    h.op = static_cast<uint8_t>(op);
    if (cuda_) {
      if (bounce_->on_gpu(src)) {
        // Into the stream's pinned message buffer, in the stream's order (stream_bounce.h):
        // the job sends it from there.
        char* m = bounce_->message(stream);
        bounce_->copy(m, src, bytes, stream);
        return jobs_->enqueue(stream, [=, this] { send(pe, h, m, "a put-signal"); });
      }
      return jobs_->enqueue(stream, [=, this] { send_put_signal(pe, h, src); });
    }
    transfers_->finish_begun();
    send(pe, h, src, "a put-signal");
  }
  uint64_t fetch_add(int pe, uint64_t* word, uint64_t value) override {
    require_atomics();
    transfers_->finish_begun();
    wire::Header h = header(wire::Kind::FetchAdd);
    h.word = heap_.offset_of(word);
    h.a = value;
    return send(pe, h, nullptr, "an atomic fetch-add", true);
  }
  uint64_t compare_swap(int pe, uint64_t* word, uint64_t expected, uint64_t desired) override {
    require_atomics();
    transfers_->finish_begun();
    wire::Header h = header(wire::Kind::CompareSwap);
    h.word = heap_.offset_of(word);
    h.a = expected;
    h.b = desired;
    return send(pe, h, nullptr, "an atomic compare-swap", true);
  }
  void quiet(symcommStream_t stream) override {
    if (cuda_) return jobs_->enqueue(stream, [this] { flush(); });
    transfers_->finish_begun();
    flush();
  }
  void single_writer_words(const void* base, size_t bytes) override {
    memory_->single_writer_words(base, bytes);
  }

  DeviceNetRing device_ring() override {
    if (!cuda_) return DeviceNetRing{};
    std::lock_guard<std::mutex> lock(ring_mutex_);
    if (!ring_) {
      ring_ = std::make_unique<DeviceRing>(device_, heap_.base(),
                                           heap_.base() + heap_.max_bytes(),
                                           std::min<uint64_t>(kDeviceInline.get(), eager_max_));
      jobs_->add_source([this] {
        return ring_->reader().poll([this](const DeviceNetOp& op) { run_device_op(op); });
      });
    }
    return ring_->view();
  }
  std::vector<symcommNetLane_t> net_lanes(int pe) const override {
    return transfers_->lanes(pe);
  }
  void raise_failure() override {
    if (jobs_) jobs_->raise_failure();
  }
  // The peers this transport serves (the others are mapped, or this rank).
  void serve(const std::vector<int>& peers) {
    for (int pe : peers) serves_[static_cast<size_t>(pe)] = true;
  }

  void progress() override {
    // (cuda-space waits run on the GPU.) Every rail: a write that lands here completes at its
    // sender once this side's endpoint has progressed (tcp's progress is manual), and a rail's
    // proxy thread may be napping; on 2 rails, 64 KiB puts striped in halves took 3x longer
    // than on one while only the first rail was driven by the waiting thread.
    // The rails on which peers' messages (what a wait is for) arrive, every call; the others
    // every fourth (each is a pass over a completion queue, a system call for tcp).
    if (cuda_) return;
    thread_local unsigned calls = 0;
    const bool all = ++calls % 4 == 0;
    for (size_t i = 0; i < rails_.size(); ++i)
      if (all || message_rails_[i]) rails_[i].proxy->progress();
  }
  void abort() override {
    transfers_->abort();
    const char* why = "the communicator was aborted (a peer was lost)";
    if (jobs_) jobs_->abort(why);
    for (Rail& r : rails_) r.proxy->abort(why);
  }

 private:
  void require_atomics() const {
    SYMCOMM_REQUIRE(memory_->atomics(), symcommNotSupported,
                    "host-side atomics on symmetric words need the host space (in the cuda "
                    "space the words are GPU memory: use the device API's atomics)");
  }

  void flush() {
    // Writes completed in their calls (the cuda space's staged puts once complete() returns:
    // each chunk's reply comes once it landed); messages are delivered but perhaps not yet
    // applied: each peer sent one since the last quiet answers a flush once it applied them.
    if (staging_) staging_->complete(-1);
    for (size_t pe = 0; pe < dirty_.size(); ++pe)
      if (dirty_[pe].exchange(false)) {
        if (lanes_fail_over(static_cast<int>(pe)))
          messages_->quiet(static_cast<int>(pe), header(wire::Kind::Flush));
        else
          send(static_cast<int>(pe), header(wire::Kind::Flush), nullptr, "a quiet", true);
      }
  }

  // The cuda space: a put-signal of up to SYMCOMM_NET_EAGER_MAX bytes as one message, its
  // payload read from `src` wherever it is, as the GPU sees it.
  void send_put_signal(int pe, const wire::Header& h, const void* src) {
    std::vector<uint8_t> payload(h.bytes);
    memory_->read_message(payload.data(), src, h.bytes);
    send(pe, h, payload.data(), "a put-signal");
  }

  // An operation that a kernel handed over through the ring, on the stream worker (which
  // owns the staging slots): carried out when it returns.
  void run_device_op(const DeviceNetOp& op) {
    trace::Scope t("device op");
    if (op.kind == kDeviceNetQuiet) return flush();
    const int pe = op.pe;
    SYMCOMM_REQUIRE(pe >= 0 && static_cast<size_t>(pe) < serves_.size() &&
                        serves_[static_cast<size_t>(pe)],
                    symcommInvalidArgument, "a kernel handed the net transport of rank %d an "
                    "operation for rank %d, which it does not serve", rank_, pe);
    void* local = reinterpret_cast<void*>(static_cast<uintptr_t>(op.local));
    wire::Header h = signal_header(op.signal, op.value, op.op);
    switch (op.kind) {
      case kDeviceNetPut:
        return staging_->put(pe, op.offset, local, op.bytes);
      case kDeviceNetGet:
        return staging_->get(pe, local, op.offset, op.bytes);
      case kDeviceNetPutSignal:
        if (op.bytes <= eager_max_) {
          h.kind = wire::Kind::PutSignal;
          h.offset = op.offset;
          h.bytes = static_cast<uint32_t>(op.bytes);
          return send_put_signal(pe, h, local);
        }
        staging_->put(pe, op.offset, local, op.bytes);
        [[fallthrough]];
      case kDeviceNetSignal:
        send(pe, h, nullptr, "a signal");
        return;
      case kDeviceNetPutSignalInline:
        SYMCOMM_REQUIRE(op.bytes != 0 && op.bytes <= kDeviceNetInlineBytes, symcommInternalError,
                        "a kernel handed over a put-signal of %llu bytes in its descriptor",
                        static_cast<unsigned long long>(op.bytes));
        h.kind = wire::Kind::PutSignal;
        h.offset = op.offset;
        h.bytes = static_cast<uint32_t>(op.bytes);
        send(pe, h, op.data, "a put-signal");
        return;
      default:
        SYMCOMM_THROW(symcommInternalError, "a kernel handed over an operation of kind %u",
                      op.kind);
    }
  }

  wire::Header header(wire::Kind kind) const {
    wire::Header h{};
    h.kind = kind;
    h.from = rank_;
    return h;
  }
  // A signal's message: `op` (symcommSignalOp_t) with `value` on the word at heap offset
  // `word` of the target.
  wire::Header signal_header(uint64_t word, uint64_t value, uint32_t op) const {
    wire::Header h = header(wire::Kind::Signal);
    h.word = word;
    h.a = value;
    h.op = static_cast<uint8_t>(op);
    return h;
  }

  // Messages go on lane 0 of a peer: this rank's rail 0 (proxy_) to this rail of pe's, so
  // that the ranks sending to one rank spread over its rails; its replies come back to rail 0.
  int message_rail(int pe) const { return rail_set_->lanes(pe)[0].remote_rail; }

  // Several lanes to `pe`: writes carry no immediate data (rail_transfer.h), so neither they
  // nor reads complete anything at the target, whose proxy would nap through them (tcp moves
  // data only while the target polls: 2 unshaped veth rails ran 64 MiB puts at 0.36 GB/s,
  // one rail at 1.6). A transfer from 64 KiB on first asks the target to poll for twice the
  // time the lanes' measured rates give it (1 GB/s where none is measured yet), 2 ms more.
  void hold(int pe, size_t bytes) {
    if (!lanes_fail_over(pe) || bytes < (64 << 10)) return;
    double rate = 0;
    for (const symcommNetLane_t& l : transfers_->lanes(pe))
      if (l.up) rate += l.bytes_per_second;
    if (rate <= 0) rate = 1e9;
    wire::Header h = header(wire::Kind::Hold);
    h.a = static_cast<uint64_t>(std::min(2e6 * static_cast<double>(bytes) / rate + 2000, 1e7));
    send(pe, h, nullptr, "a hold");
  }

  // Messages to `pe` go through messages_ (numbered, failed over) where there are several
  // lanes to it.
  bool lanes_fail_over(int pe) const { return rail_set_->lanes(pe).size() > 1; }

  uint64_t send(int pe, const wire::Header& h, const void* payload, const char* what,
                bool reply = false) {
    if (staging_) staging_->complete(pe);  // after puts' chunks left in flight (staging.h)
    if (lanes_fail_over(pe)) {
      if (!reply) dirty_[static_cast<size_t>(pe)].store(true);
      return messages_->send(pe, h, payload, what, reply);
    }
    if (!reply && !cuda_ && sizeof h + h.bytes <= endpoint_->inject_size()) {
      // A small message without a reply goes from this thread (the host space completes
      // each call before it returns; nothing of this thread's is queued at the proxy). Not
      // the cuda space's worker: its proxy polls without napping, holding the endpoint's lock
      // most of the time, and an 8-byte put-signal took 27-29 us one way with fi_inject from
      // the worker against 23-25 us handed over (2 ranks as 2 nodes on one H200).
      thread_local std::vector<uint8_t> small(wire::kBufferBytes);
      std::memcpy(small.data(), &h, sizeof h);
      if (h.bytes) std::memcpy(small.data() + sizeof h, payload, h.bytes);
      dirty_[static_cast<size_t>(pe)].store(true);
      if (proxy_->try_inject(pe, message_rail(pe), small.data(), sizeof h + h.bytes)) return 0;
    }
    std::shared_ptr<NetOp> op = Proxy::message(pe, h, payload, reply, message_rail(pe));
    if (!reply) dirty_[static_cast<size_t>(pe)].store(true);
    proxy_->submit(op);
    proxy_->wait(*op, timeout_ms_, what, /*drive=*/!cuda_);
    return op->reply;
  }

  Heap& heap_;
  int rank_;
  int device_;
  bool cuda_;  // the cuda space: staged, stream-ordered
  bool staged_;  // puts and gets through the staging inbox: the cuda space, or
                 // SYMCOMM_NET_STAGE_HOST
  int64_t timeout_ms_;
  size_t chunk_;
  size_t eager_max_;  // SYMCOMM_NET_EAGER_MAX
  std::atomic<size_t> end_{0};  // of the heap as registered: what peers may address
  std::vector<std::atomic<bool>> dirty_;  // [pe]: a message went there since the last quiet
  struct Rail {  // the endpoint (rail_set_'s) closes before its proxy goes (Proxy::stop)
    std::unique_ptr<Proxy> proxy;
    FabricEndpoint* endpoint = nullptr;
  };
  std::unique_ptr<RailSet> rail_set_;  // this rank's endpoints, every rank's rails and keys
  std::vector<Rail> rails_;       // one endpoint and proxy a rail (net_rail_domains())
  std::vector<bool> message_rails_;  // [rail]: a peer's messages arrive there
  std::unique_ptr<ProxyLoop> loop_;  // the thread that drives every rail's proxy
  FabricEndpoint* endpoint_ = nullptr;  // rail 0's: messages, and the cuda space's staging
  Proxy* proxy_ = nullptr;              // rail 0's
  std::unique_ptr<LaneTransfers> transfers_;  // writes and reads over the lanes
  std::unique_ptr<LaneMessages> messages_;  // messages over the lanes; what arrives
  std::unique_ptr<MessageApply> apply_;     // what arrives, applied here
  std::unique_ptr<CopyContext> copy_context_;  // the cuda space's; outlives what copies in it
  std::unique_ptr<LocalMemory> memory_;
  std::unique_ptr<Staging> staging_;   // the cuda space's (and SYMCOMM_NET_STAGE_HOST's)
  std::unique_ptr<StreamJobs> jobs_;   // the cuda space's
  std::unique_ptr<StreamBounce> bounce_;  // the cuda space's
  std::vector<bool> serves_ = std::vector<bool>(dirty_.size(), false);  // [pe]: a peer of ours
  std::mutex ring_mutex_;
  std::unique_ptr<DeviceRing> ring_;   // the cuda space's, from the first device handle
};

class NetKind final : public TransportKind {
 public:
  const char* name() const override { return "net"; }
  Verdict can_connect(const TransportContext&, int) const override { return Verdict::yes(); }
  std::unique_ptr<Transport> open(TransportContext& ctx,
                                  const std::vector<int>& peers) const override {
    auto net = std::make_unique<Net>(ctx);
    net->serve(peers);
    if (kConnectAtInit.get()) net->connect(peers);
    return net;
  }
};

const Registered<TransportKind, NetKind> kRegistered(20);

}  // namespace

}  // namespace symcomm
