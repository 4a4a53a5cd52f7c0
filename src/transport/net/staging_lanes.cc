// Staging over several lanes to the target (staging.h): the chunks' writes and reads through
// LaneTransfers, their landing and staging asked for by messages.
#include "transport/net/staging.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <exception>
#include <optional>
#include <vector>

#include "base/cuda_runtime_check.h"
#include "base/error.h"

namespace symcomm {

namespace {

// Chunks written and not yet landed at most. A chunk's Landed message goes on the messages'
// lane behind whatever data was queued there before it: with 4 chunks in flight it waited
// for up to 3 chunks' data, and 2 veth rails shaped to 1 Gbit/s carried staged puts of 16 and
// 64 MiB at 1.73x and 1.76x one rail's raw rate; with 2 in flight 1.93x, with 1 1.98x
// (SYMCOMM_NET_STAGE_HOST). Two, so that a chunk's copy into the outbox and its write still
// overlap the landing of the chunk before it where the links are fast.
constexpr size_t kInFlight = 2;
static_assert(kInFlight <= Staging::kSlots, "each chunk in flight holds a slot");

wire::Header staging_header(wire::Kind kind, int from, int slot, size_t offset, size_t bytes) {
  wire::Header h{};
  h.kind = kind;
  h.from = from;
  h.a = static_cast<uint64_t>(slot);
  h.offset = offset;
  h.b = bytes;  // (bytes counts a payload, which these messages have none of)
  return h;
}

}  // namespace

void Staging::put(const Lanes& lanes, int pe, size_t offset, const void* src, size_t bytes) {
  complete_slots(-1);  // the slots, from the first, are this put's
  WorkerScope guard(context_);
  struct InFlight {
    LaneTransfers::Pending write;
    size_t offset, piece;
  };
  std::vector<std::optional<InFlight>> slots(kSlots);
  // The chunk in slot s landed: its write completed (it is in the target's inbox), and the
  // target copied it into its heap (the Landed message's reply).
  auto land = [&](int s) {
    lanes.transfers.finish(slots[static_cast<size_t>(s)]->write);  // throws: the slot stays
    const InFlight f = std::move(*slots[static_cast<size_t>(s)]);
    slots[static_cast<size_t>(s)].reset();
    const uint64_t refused =
        lanes.send(pe, staging_header(wire::Kind::Landed, rank_, s, f.offset, f.piece),
                   "a put", true);
    SYMCOMM_REQUIRE(refused == 0, symcommInternalError,
                    "rank %d refused a staged chunk of a put (heap offset out of range)", pe);
  };
  lanes.hold(pe, bytes);
  try {
    size_t k = 0;
    for (size_t done = 0; done < bytes; ++k) {
      const size_t piece = std::min(chunk_, bytes - done);
      const int s = static_cast<int>(k % kSlots);
      if (k >= kInFlight) {  // the chunk kInFlight before this one lands first
        const int oldest = static_cast<int>((k - kInFlight) % kSlots);
        if (slots[static_cast<size_t>(oldest)]) land(oldest);
      }
      if (slots[static_cast<size_t>(s)]) land(s);
      fill_slot(s, offset + done, static_cast<const char*>(src) + done, piece, 0);
      slots[static_cast<size_t>(s)] = InFlight{
          lanes.transfers.start(NetOp::Type::Write, pe,
                                kStagingOffset + inbox_offset(pe, rank_, s), outbox_slot(s),
                                kHeader + piece),
          offset + done, piece};
      done += piece;
    }
    // The rest in the order they went.
    for (size_t j = 0; j < kSlots; ++j) {
      const int s = static_cast<int>((k + j) % kSlots);
      if (slots[static_cast<size_t>(s)]) land(s);
    }
  } catch (...) {
    // Nothing of this call's may still write into the outbox's slots or read them.
    for (auto& f : slots)
      if (f) {
        try {
          lanes.transfers.finish(f->write);
        } catch (const Error&) {
        }
      }
    throw;
  }
}

void Staging::get(const Lanes& lanes, int pe, void* dst, size_t offset, size_t bytes) {
  complete_slots(-1);  // the slots, from the first, are this get's
  WorkerScope guard(context_);
  const bool to_gpu = on_gpu(dst);
  lanes.hold(pe, bytes);
  for (size_t done = 0; done < bytes;) {
    // Up to kSlots chunks at a time: the target stages each in its slot, this rank reads them
    // (striped over the lanes) and copies them out.
    size_t pieces[kSlots] = {};
    int n = 0;
    for (size_t at = done; n < kSlots && at < bytes; ++n) {
      pieces[n] = std::min(chunk_, bytes - at);
      const uint64_t refused = lanes.send(
          pe, staging_header(wire::Kind::Stage, rank_, n, offset + at, pieces[n]), "a get", true);
      SYMCOMM_REQUIRE(refused == 0, symcommInternalError,
                      "rank %d refused to stage a chunk of a get (heap offset out of range)", pe);
      at += pieces[n];
    }
    std::vector<LaneTransfers::Pending> reads;
    for (int s = 0; s < n; ++s)
      reads.push_back(lanes.transfers.start(
          NetOp::Type::Read, pe, kStagingOffset + inbox_offset(pe, rank_, s) + kHeader,
          outbox_slot(s) + kHeader, pieces[s]));
    // Every read finished (none may still land in the outbox) before a failure leaves.
    std::exception_ptr failed;
    for (auto& r : reads) {
      try {
        lanes.transfers.finish(r);
      } catch (...) {
        if (!failed) failed = std::current_exception();
      }
    }
    if (failed) std::rethrow_exception(failed);
    for (int s = 0; s < n; ++s) {
      empty_slot(s, static_cast<char*>(dst) + done, pieces[s], to_gpu);
      done += pieces[s];
    }
    sync_copies();
  }
}

}  // namespace symcomm
