#include "capi/coll_batch.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "base/log.h"
#include "base/param.h"
#include "capi/call_buffer.h"
#include "capi/coll_args.h"
#include "capi/guard.h"
#include "copy/box.h"

namespace symcomm::capi {

namespace {

const SizeParam kEach("SYMCOMM_GROUP_PACK_BYTES", "64K",
                      "all-reduces of a group of at most this many bytes each run packed "
                      "together as one all-reduce (0: each runs alone)");
const SizeParam kTotal("SYMCOMM_GROUP_PACK_TOTAL", "4M",
                       "the most bytes of all-reduces of a group packed into one");
const SizeParam kDirect("SYMCOMM_GROUP_LL_BYTES", "256K",
                        "packed all-reduces of a group of at most this many bytes in all run as "
                        "one ll kernel that reads and writes the calls' buffers themselves, "
                        "where ll can run them (the cuda space, a team of one node); larger "
                        "runs are copied into one buffer and back (0: every run is)");

// Each call's part of the packed buffer starts on this boundary (the algorithms' vector
// paths want 16 bytes; the padding between parts is reduced along and thrown away).
constexpr size_t kAlign = 256;

size_t bytes_of(const Group::AllReduce& a) { return a.count * type_size(a.type); }

bool overlap(const void* a, size_t an, const void* b, size_t bn) {
  const auto x = reinterpret_cast<uintptr_t>(a), y = reinterpret_cast<uintptr_t>(b);
  return an && bn && x < y + bn && y < x + an;
}

// The calls that a run holds at once: ll's most buffers of one all-reduce (coll/ll.cu).
size_t most_calls() {
  static const size_t most = [] {
    const CollAlgorithm* ll = find_coll_algorithm("ll");
    return ll ? static_cast<size_t>(std::max(2, ll->descriptor().max_segments)) : SIZE_MAX;
  }();
  return most;
}

// The parameters of one group's end, read once.
struct Limits {
  size_t each = kEach.get(), total = kTotal.get(), direct = kDirect.get();
  size_t calls = most_calls();
};

// A call whose send and recv overlap other than in place runs alone (its checks refuse it).
bool packable_alone(const Group::AllReduce& a, const Limits& limits) {
  const size_t bytes = bytes_of(a);
  return bytes <= limits.each && (a.send == a.recv || !overlap(a.send, bytes, a.recv, bytes));
}

// Whether `next` may join the run of `run` (its first call's comm, team, type, op, stream).
// No buffer of a run overlaps another call's, so that the calls' results do not depend on
// which runs first (one kernel may run them all at once).
bool joins(const std::vector<Group::AllReduce>& run, const Group::AllReduce& next,
           size_t total, const Limits& limits) {
  const Group::AllReduce& first = run.front();
  if (next.comm != first.comm || next.team != first.team || next.type != first.type ||
      next.op != first.op || next.stream != first.stream || run.size() >= limits.calls)
    return false;
  const size_t bytes = bytes_of(next);
  if (!packable_alone(next, limits) || total + bytes > limits.total) return false;
  for (const Group::AllReduce& k : run) {
    const size_t kb = bytes_of(k);
    if (overlap(next.send, bytes, k.recv, kb) || overlap(next.recv, bytes, k.send, kb) ||
        overlap(next.recv, bytes, k.recv, kb))
      return false;
  }
  return true;
}

// The run's calls as one: their buffers checked as each call checks them, packed, one
// all-reduce (which checks the rest and agrees with the peers), unpacked.
symcommResult_t run_packed(const std::vector<Group::AllReduce>& run, size_t direct) {
  const Group::AllReduce& first = run.front();
  return guarded(
      [&] {
        return format("symcommGroupEnd: %zu all-reduces of type %d packed into one", run.size(),
                      static_cast<int>(first.type));
      },
      [&] {
        symcommComm& c = checked(first.comm);
        c.check_live();
        const size_t elem = type_size(first.type);
        std::vector<size_t> at;
        size_t total = 0;
        for (const Group::AllReduce& k : run) {
          const size_t bytes = bytes_of(k);
          SYMCOMM_REQUIRE(k.send && k.recv, symcommInvalidArgument, "an all-reduce's %s is NULL",
                          k.send ? "recv" : "send");
          require_aligned(k.send, elem, "send");
          require_aligned(k.recv, elem, "recv");
          require_reach(c, k.send, bytes, "send");
          require_reach(c, k.recv, bytes, "recv");
          at.push_back(total);
          total += (bytes + kAlign - 1) / kAlign * kAlign;
        }
        if (total <= direct) {  // one ll kernel on the buffers themselves
          std::vector<CollSegment> parts;
          for (const Group::AllReduce& k : run)
            parts.push_back({static_cast<const char*>(k.send), static_cast<char*>(k.recv),
                             bytes_of(k)});
          if (all_reduce_segments(c, first.team, parts, first.type, first.op, first.stream))
            return;
        }
        CallBuffer buffer(c, first.stream, "a group's packed all-reduces");
        char* const packed = buffer.get(total);
        std::vector<BoxCopy> in, out;
        for (size_t i = 0; i < run.size(); ++i) {
          char* part = packed + at[i];
          const auto count = static_cast<int64_t>(run[i].count);
          append_linear_copy(in, part, run[i].send, count, elem, -1);
          append_linear_copy(out, run[i].recv, part, count, elem, -1);
        }
        c.copies->copy_boxes(in, elem, first.stream);
        const symcommResult_t rc =
            symcommAllReduceOnStream(first.comm, first.team, packed, packed,
                                     total / elem, first.type, first.op, nullptr, first.stream);
        SYMCOMM_REQUIRE(rc == symcommSuccess, rc, "%s", symcommGetLastError());
        c.copies->copy_boxes(out, elem, first.stream);
      });
}

}  // namespace

void pack_all_reduces(std::vector<Group::Collective>& collectives) {
  const Limits limits;
  if (limits.each == 0) return;
  std::vector<Group::Collective> out;
  for (size_t i = 0; i < collectives.size();) {
    std::vector<Group::AllReduce> run;
    size_t total = 0, j = i;
    for (; j < collectives.size() && collectives[j].all_reduce; ++j) {
      const Group::AllReduce& next = *collectives[j].all_reduce;
      if (!run.empty() && !joins(run, next, total, limits)) break;
      if (run.empty() && !packable_alone(next, limits)) break;
      run.push_back(next);
      total += bytes_of(next);
    }
    if (run.size() < 2) {
      out.push_back(std::move(collectives[i]));
      ++i;
      continue;
    }
    out.push_back({collectives[i].comm_id, [run, direct = limits.direct] { return run_packed(run, direct); }, std::nullopt});
    i = j;
  }
  collectives = std::move(out);
}

}  // namespace symcomm::capi
