#include "transport/net/message_apply.h"

#include <algorithm>
#include <chrono>

#include "base/log.h"
#include "transport/trace.h"

namespace symcomm {

uint64_t MessageApply::operator()(Proxy& via, const wire::Header& h, const uint8_t* payload) {
  const size_t mapped = mapped_.load();
  auto word = [&]() -> uint64_t* {
    if (h.word % 8 || h.word + 8 > mapped) return nullptr;
    return reinterpret_cast<uint64_t*>(heap_ + h.word);
  };
  switch (h.kind) {
    case wire::Kind::PutSignal:
      if (h.bytes > wire::kEagerMax || h.offset + h.bytes > mapped) return 0;
      SYMCOMM_TRACE("applies rank %d's put-signal: %u bytes at %llu, word %llu %s %llu",
                    h.from, h.bytes, static_cast<unsigned long long>(h.offset),
                    static_cast<unsigned long long>(h.word), h.op == 0 ? "set" : "add",
                    static_cast<unsigned long long>(h.a));
      memory_.write_message_then_signal(heap_ + h.offset, payload, h.bytes, word(), h.a,
                                        static_cast<symcommSignalOp_t>(h.op));
      trace::mark("signal applied");
      return 0;
    case wire::Kind::Signal:
      SYMCOMM_TRACE("applies rank %d's signal: word %llu %s %llu", h.from,
                    static_cast<unsigned long long>(h.word), h.op == 0 ? "set" : "add",
                    static_cast<unsigned long long>(h.a));
      if (uint64_t* w = word()) memory_.signal(w, h.a, static_cast<symcommSignalOp_t>(h.op));
      trace::mark("signal applied");
      return 0;
    case wire::Kind::Stage:
      return staging_ ? staging_->on_stage(h, memory_) : 1;
    case wire::Kind::Landed:
      return staging_ ? staging_->on_landed_message(h, memory_) : 1;
    case wire::Kind::Hold:
      loop_.hold_for(std::chrono::microseconds(std::min<uint64_t>(h.a, 10000000)));
      return 0;
    case wire::Kind::Disconnect:  // answered once closed
      transfers_.on_disconnect(via, h);
      return 0;
    case wire::Kind::FetchAdd:
      if (!memory_.atomics()) return 0;
      if (uint64_t* w = word()) return __atomic_fetch_add(w, h.a, __ATOMIC_SEQ_CST);
      return 0;
    case wire::Kind::CompareSwap:
      if (!memory_.atomics()) return 0;
      if (uint64_t* w = word()) {
        uint64_t expected = h.a;
        __atomic_compare_exchange_n(w, &expected, h.b, false, __ATOMIC_SEQ_CST,
                                    __ATOMIC_SEQ_CST);
        return expected;
      }
      return 0;
    default:
      return 0;  // Flush: everything before it is applied
  }
}

}  // namespace symcomm
