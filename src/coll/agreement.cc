// SYMCOMM_COLL_CHECK: see agreement.h. Every member sends a record of its call to team rank
// 0 under the team's tag (bootstrap messages under one tag between two ranks arrive in
// order, so the k-th checked call of each member meets the k-th of team rank 0); team rank
// 0 compares each with its own and answers every member with one verdict, "" or the
// message that every member throws.
#include "coll/agreement.h"

#include <cstring>
#include <vector>

#include "base/param.h"
#include "bootstrap/bootstrap.h"

namespace symcomm {

namespace {

const SwitchParam kCollCheck(
    "SYMCOMM_COLL_CHECK",
    "check before every collective that the members of its team agree on it (operation, type, "
    "count, reduction, root, kind and offset of symmetric buffers, the algorithm chosen, "
    "all-to-all-v host counts pairwise; on-stream team barriers take their turn): a host "
    "round trip through the bootstrap per call; auto: on in the host memory space, off in the "
    "cuda space, where the round trip (tens of microseconds) would dwarf small collectives; "
    "read when a communicator is created");

constexpr uint64_t kCheckTag = uint64_t{0x4343} << 48;  // "CC", then the team id
constexpr int32_t kBarrierOp = 100;  // Head::op of symcommBarrierOnStream (no CollOp)

const char* op_name(int32_t op) {
  return op == kBarrierOp ? "barrier" : coll_op_name(static_cast<CollOp>(op));
}

// Where a buffer is, comparably across ranks.
enum class Kind : int32_t {
  kUnused,      // not read or empty: agrees with anything
  kPlain,       // not addressable by peers: no offset to agree on
  kHeap,        // symmetric: heap offset
  kRegistered,  // registration `serial`, offset in it
  kInRecv,      // inside recv (in place): offset from recv, less this rank's block for all-gather
};

struct Place {
  Kind kind = Kind::kUnused;
  uint64_t serial = 0, offset = 0;
};

// The fixed part of a member's record; the algorithm (or why none could run, or why the
// call was refused) and, for host all-to-all-v, the 2 n counts follow it.
struct Head {
  uint64_t call;    // the member's checked calls on the team so far, this one included
  int32_t abandon;  // not a call: the member gave up waiting for the verdict on `call`
  int32_t refused;  // the call's arguments were refused on this member (the text says why)
  int32_t op, type, redop, root, counts_on_device;
  uint64_t count;
  Place send, recv;
  uint32_t text_bytes, counts;
};

Place place_of(const CollContext& ctx, const void* p, size_t bytes) {
  if (p == nullptr || bytes == 0) return {};
  if (ctx.heap().contains(p)) return {Kind::kHeap, 0, ctx.heap().offset_of(p)};
  if (const Registration* r = ctx.registrations().find(p, bytes))
    return {Kind::kRegistered, r->serial, static_cast<uint64_t>(static_cast<const char*>(p) - r->ptr)};
  return {Kind::kPlain, 0, 0};
}

std::string record(const CollArgs& a, uint64_t call, const std::string& text, bool refused,
                   bool barrier, const CollContext& ctx) {
  Head h{};
  h.call = call;
  h.refused = refused;
  std::vector<uint64_t> counts;
  if (barrier) {
    h.op = kBarrierOp;
  } else if (!refused) {
    h.op = static_cast<int32_t>(a.op);
    h.type = static_cast<int32_t>(a.type);
    h.redop = static_cast<int32_t>(a.redop);
    h.root = a.root;
    h.counts_on_device = a.counts_on_device;
    h.count = a.count;
    const size_t rb = a.recv_bytes;
    h.recv = place_of(ctx, a.recv, rb);
    // A send this rank does not read (a broadcast's on a member other than the root; an empty
    // one) stays unused, wherever it points: it agrees with anything.
    const char* s = a.send_bytes ? a.send : nullptr;
    if (s && a.recv && rb && s >= a.recv && s < a.recv + rb) {
      uint64_t off = static_cast<uint64_t>(s - a.recv);
      if (a.op == CollOp::AllGather) off -= static_cast<uint64_t>(a.me) * a.count * a.elem;
      h.send = {Kind::kInRecv, 0, off};
    } else {
      h.send = place_of(ctx, s, a.send_bytes);
    }
    if (a.op == CollOp::AllToAllv && !a.counts_on_device) {
      counts.assign(a.send_counts, a.send_counts + a.team.size);
      counts.insert(counts.end(), a.recv_counts, a.recv_counts + a.team.size);
    }
  }
  h.text_bytes = static_cast<uint32_t>(text.size());
  h.counts = static_cast<uint32_t>(counts.size());
  std::string out(reinterpret_cast<const char*>(&h), sizeof h);
  out += text;
  out.append(reinterpret_cast<const char*>(counts.data()), counts.size() * sizeof(uint64_t));
  return out;
}

struct Parsed {
  Head head;
  std::string text;
  std::vector<uint64_t> counts;  // send counts, then receive counts
};

Parsed parse(const std::string& r, int member) {
  Parsed p{};
  SYMCOMM_REQUIRE(r.size() >= sizeof p.head, symcommInternalError,
                  "SYMCOMM_COLL_CHECK: team rank %d's record has %zu bytes", member, r.size());
  std::memcpy(&p.head, r.data(), sizeof p.head);
  const size_t want = sizeof p.head + p.head.text_bytes + p.head.counts * sizeof(uint64_t);
  SYMCOMM_REQUIRE(r.size() == want, symcommInternalError,
                  "SYMCOMM_COLL_CHECK: team rank %d's record has %zu bytes, not %zu", member,
                  r.size(), want);
  p.text = r.substr(sizeof p.head, p.head.text_bytes);
  p.counts.resize(p.head.counts);
  std::memcpy(p.counts.data(), r.data() + sizeof p.head + p.head.text_bytes,
              p.counts.size() * sizeof(uint64_t));
  return p;
}

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::kUnused: return "unused";
    case Kind::kPlain: return "not symmetric";
    case Kind::kHeap: return "symmetric";
    case Kind::kRegistered: return "registered";
    case Kind::kInRecv: return "in recv";
  }
  return "?";
}

std::string place_text(const Place& p) {
  switch (p.kind) {
    case Kind::kHeap: return format("at heap offset %llu", static_cast<unsigned long long>(p.offset));
    case Kind::kRegistered:
      return format("at offset %llu of registration %llu", static_cast<unsigned long long>(p.offset),
                    static_cast<unsigned long long>(p.serial));
    case Kind::kInRecv:
      return format("in recv at offset %llu (less this member's block for all-gather)",
                    static_cast<unsigned long long>(p.offset));
    default: return kind_name(p.kind);
  }
}

bool places_agree(const Place& x, const Place& y) {
  if (x.kind == Kind::kUnused || y.kind == Kind::kUnused) return true;
  if (x.kind != y.kind) return false;
  return x.kind == Kind::kPlain || (x.serial == y.serial && x.offset == y.offset);
}

// "" where member m's record agrees with team rank 0's, else what differs. `who(m)` names
// a member.
template <typename Who>
std::string compare(const Parsed& zero, const Parsed& mine, int m, Who who) {
  const Head &x = zero.head, &y = mine.head;
  auto differ = [&](const char* what, const std::string& vm, const std::string& v0) {
    return format("%s passes %s %s, %s passes %s", who(m).c_str(), what, vm.c_str(),
                  who(0).c_str(), v0.c_str());
  };
  auto num = [](long long v) { return format("%lld", v); };
  if (y.op != x.op) return differ("operation", op_name(y.op), op_name(x.op));
  if (x.op == kBarrierOp) return "";
  const auto op = static_cast<CollOp>(x.op);
  if (y.type != x.type) return differ("type", num(y.type), num(x.type));
  if (op == CollOp::AllToAllv && y.counts_on_device != x.counts_on_device)
    return differ("counts", y.counts_on_device ? "on the device" : "on the host",
                  x.counts_on_device ? "on the device" : "on the host");
  if (op != CollOp::AllToAllv && y.count != x.count)
    return differ("count", num(static_cast<long long>(y.count)), num(static_cast<long long>(x.count)));
  if ((op == CollOp::AllReduce || op == CollOp::ReduceScatter || op == CollOp::Reduce) &&
      y.redop != x.redop)
    return differ("reduction", num(y.redop), num(x.redop));
  const bool rooted = op == CollOp::Broadcast || op == CollOp::Reduce ||
                      op == CollOp::Gather || op == CollOp::Scatter;
  if (rooted && y.root != x.root) return differ("root", num(y.root), num(x.root));
  // Reduce, gather and scatter read and write only their own member's buffers (the root's
  // receive or send buffer is its alone): their kinds need not agree.
  if (op == CollOp::Reduce || op == CollOp::Gather || op == CollOp::Scatter) {
    if (mine.text != zero.text) return differ("algorithm", mine.text, zero.text);
    return "";
  }
  // Each buffer is symmetric (or registered) on every member or on none; an empty one
  // agrees with either (its member cannot tell which kind the call is, and capi/coll.cc's
  // whole-call flag guesses). Where a buffer is symmetric, peers address it: the same object
  // at the same offset (or in place alike); a plain one is its member's own affair.
  auto kind = [](const Head& h, const Place& p) {  // -1: empty, 0: plain, 1: symmetric
    const Place& q = p.kind == Kind::kInRecv ? h.recv : p;
    return q.kind == Kind::kUnused ? -1 : q.kind == Kind::kPlain ? 0 : 1;
  };
  for (const bool is_recv : {true, false}) {
    const Place &px = is_recv ? x.recv : x.send, &py = is_recv ? y.recv : y.send;
    const int kx = kind(x, px), ky = kind(y, py);
    if (kx >= 0 && ky >= 0 && kx != ky)
      return differ("buffers that are", ky ? "symmetric (or registered)" : "not symmetric",
                    kx ? "symmetric (or registered)" : "not symmetric");
    if (kx == 1 && ky == 1 && !places_agree(py, px))
      return differ(is_recv ? "recv" : "send", place_text(py), place_text(px));
  }
  if (mine.text != zero.text) return differ("algorithm", mine.text, zero.text);
  return "";
}

// Host all-to-all-v: recvcounts[i] of member j against sendcounts[j] of member i.
template <typename Who>
std::string compare_counts(const std::vector<Parsed>& all, Who who) {
  const size_t n = all.size();
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < n; ++j) {
      const uint64_t sent = all[i].counts[j], expected = all[j].counts[n + i];
      if (sent != expected)
        return format("%s sends sendcounts[%zu] = %llu elements to team rank %zu, whose "
                      "recvcounts[%zu] is %llu", who(static_cast<int>(i)).c_str(), j,
                      static_cast<unsigned long long>(sent), j, i,
                      static_cast<unsigned long long>(expected));
    }
  return "";
}

}  // namespace

bool coll_check_requested(symcommMemorySpace_t space) {
  return kCollCheck.get(space == symcommSpaceHost);
}

namespace {

// A verdict: the call it answers, whether it ends the team's checks, and the message ("": the
// members agree).
struct Verdict {
  uint64_t call = 0;
  bool ends = false;
  std::string text;
  std::string encode() const {
    std::string out(reinterpret_cast<const char*>(&call), sizeof call);
    out += static_cast<char>(ends);
    return out + text;
  }
  static Verdict decode(const std::string& m) {
    Verdict v;
    SYMCOMM_REQUIRE(m.size() > sizeof v.call, symcommInternalError,
                    "SYMCOMM_COLL_CHECK: a verdict of %zu bytes", m.size());
    std::memcpy(&v.call, m.data(), sizeof v.call);
    v.ends = m[sizeof v.call] != 0;
    v.text = m.substr(sizeof v.call + 1);
    return v;
  }
};

void check(const CollArgs& a, const std::string& text, bool refused, bool barrier,
           CollContext& ctx) {
  const int n = a.team.size;
  if (n <= 1) return;
  // A member that came late, skipped a call or gave up waiting ended the team's checks on
  // every member: from then on no member could tell which of another's calls meets which of
  // its own.
  if (const std::string& ended = ctx.checks_ended(a.team_id); !ended.empty())
    throw Error(symcommTimeout, ended);
  Bootstrap& bs = ctx.rma().bootstrap();
  const uint64_t tag = kCheckTag ^ static_cast<uint64_t>(static_cast<uint32_t>(a.team_id));
  const uint64_t call = ctx.count_checked_call(a.team_id);
  const std::string mine = record(a, call, text, refused, barrier, ctx);
  const int zero = a.team.world_of(0);
  auto who = [&](int m) { return format("team rank %d (rank %d)", m, a.team.world_of(m)); };
  auto end_checks = [&](const std::string& why) {
    ctx.end_checks(a.team_id, format("%s; the SYMCOMM_COLL_CHECK checks of team %d ended there "
                                     "on every member, and so do its collectives (finalize the "
                                     "communicator)", why.c_str(), a.team_id));
  };
  // A record or a verdict that does not come within SYMCOMM_BOOTSTRAP_TIMEOUT.
  auto timed_out = [&](int m, const char* what, const Error& e) {
    return format("SYMCOMM_COLL_CHECK: %s of team %d sent no %s for call %llu within "
                  "SYMCOMM_BOOTSTRAP_TIMEOUT (%s): %s", who(m).c_str(), a.team_id, what,
                  static_cast<unsigned long long>(call),
                  m == 0 ? "it waits for a member that did not make the call, or skipped it"
                         : "it did not make the call, or made the team's calls in another order",
                  e.what());
  };
  auto gave_up = [&](int m, uint64_t which) {
    return format("SYMCOMM_COLL_CHECK: %s gave up call %llu of team %d: it waited "
                  "SYMCOMM_BOOTSTRAP_TIMEOUT for team rank 0, which came later (did team rank 0 "
                  "skip a collective?)", who(m).c_str(), static_cast<unsigned long long>(which),
                  a.team_id);
  };
  Verdict verdict;
  if (a.me != 0) {
    bs.send_to(zero, tag, mine);
    try {
      do verdict = Verdict::decode(bs.recv_from(zero, tag));
      while (verdict.call < call);  // answers to calls this member gave up (none are kept)
    } catch (const Error& e) {
      if (e.code() != symcommTimeout) throw;
      // Team rank 0 comes late, if ever: it must not take this member's record for a call
      // this member has left.
      Head abandon{};
      abandon.call = call;
      abandon.abandon = 1;
      try {
        bs.send_to(zero, tag,
                   std::string(reinterpret_cast<const char*>(&abandon), sizeof abandon));
      } catch (const Error&) {
      }
      end_checks(timed_out(0, "verdict", e));
      throw Error(symcommTimeout, ctx.checks_ended(a.team_id));
    }
  } else {
    std::vector<Parsed> all;
    all.push_back(parse(mine, 0));
    try {
      for (int m = 1; m < n && !verdict.ends; ++m) {
        Parsed p = parse(bs.recv_from(a.team.world_of(m), tag), m);
        // Records of calls whose check this rank gave up on long ago cannot come: it ended
        // the checks then. A member's record for another call than this one is a member that
        // skipped a call, or made the team's calls in another order; its abandoning one is a
        // member that gave up waiting for this rank.
        if (p.head.abandon || p.head.call != call) {
          verdict.ends = true;
          verdict.text = p.head.abandon
              ? gave_up(m, p.head.call)
              : format("SYMCOMM_COLL_CHECK: %s makes its call %llu of team %d where team rank 0 "
                       "makes its call %llu: a member skipped a collective of the team, or made "
                       "them in another order", who(m).c_str(),
                       static_cast<unsigned long long>(p.head.call), a.team_id,
                       static_cast<unsigned long long>(call));
        }
        all.push_back(std::move(p));
      }
    } catch (const Error& e) {
      if (e.code() != symcommTimeout) throw;
      verdict.ends = true;
      verdict.text = timed_out(static_cast<int>(all.size()), "record", e);
    }
    // A member that sent its record and then gave up (this rank came late) said so behind it.
    for (int m = 1; m < n && !verdict.ends; ++m)
      if (bs.try_recv_from(a.team.world_of(m), tag)) {
        verdict.ends = true;
        verdict.text = gave_up(m, call);
      }
    if (!verdict.ends) {
      for (int m = 0; m < n && verdict.text.empty(); ++m)
        if (all[static_cast<size_t>(m)].head.refused)
          verdict.text = format("%s refused the call: %s", who(m).c_str(),
                                all[static_cast<size_t>(m)].text.c_str());
      for (int m = 1; m < n && verdict.text.empty(); ++m)
        verdict.text = compare(all[0], all[static_cast<size_t>(m)], m, who);
      bool paired = true;  // every member sent 2 n counts (else a difference was found above)
      for (const Parsed& p : all) paired &= p.counts.size() == 2 * static_cast<size_t>(n);
      if (verdict.text.empty() && paired) verdict.text = compare_counts(all, who);
      if (!verdict.text.empty())
        verdict.text = format("SYMCOMM_COLL_CHECK: the members of team %d disagree on their call "
                              "%llu (%s on team rank 0): %s", a.team_id,
                              static_cast<unsigned long long>(call),
                              all[0].head.refused ? "refused" : op_name(all[0].head.op),
                              verdict.text.c_str());
    }
    verdict.call = call;
    // Every member is answered, a late one when it comes to this call; where the checks end,
    // as far as can be (a member that is gone learns it otherwise).
    for (int m = 1; m < n; ++m) {
      try {
        bs.send_to(a.team.world_of(m), tag, verdict.encode());
      } catch (const Error&) {
        if (!verdict.ends) throw;
      }
    }
  }
  if (verdict.ends) {
    end_checks(verdict.text);
    throw Error(symcommTimeout, ctx.checks_ended(a.team_id));
  }
  if (!verdict.text.empty()) throw Error(symcommInvalidUsage, verdict.text);
}

}  // namespace

void check_agreement(const CollArgs& a, const std::string& text, bool refused, CollContext& ctx) {
  check(a, text, refused, false, ctx);
}

void check_barrier_agreement(symcommTeam_t id, const Team& team, int me, CollContext& ctx) {
  CollArgs a{};
  a.team_id = id;
  a.team = team;
  a.me = me;
  check(a, "barrier", false, true, ctx);
}

}  // namespace symcomm
