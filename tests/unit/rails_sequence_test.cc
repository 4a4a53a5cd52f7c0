// Numbered messages over lanes that fail (src/transport/net/rails/sequence.h): the log and the
// window on their own, then together over fake lanes that deliver in a seeded random order
// (so lanes overtake each other), lose what a failed lane held, and answer late. Every message
// must be applied exactly once and in order; a fetching atomic's replay must be answered with
// the value the first one found.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <map>
#include <queue>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "transport/net/rails/sequence.h"

namespace symcomm::rails {
namespace {

std::vector<uint8_t> bytes_of(uint64_t v) {
  std::vector<uint8_t> b(sizeof v);
  std::memcpy(b.data(), &v, sizeof v);
  return b;
}
uint64_t value_of(const std::vector<uint8_t>& b) {
  uint64_t v = 0;
  std::memcpy(&v, b.data(), sizeof v);
  return v;
}

TEST(RailSequence, NumbersWrapAround) {
  EXPECT_TRUE(seq_before(0xffffffffu, 0));
  EXPECT_FALSE(seq_before(0, 0xffffffffu));
  EXPECT_FALSE(seq_before(7, 7));
  MessageLog log(0xfffffffeu);
  EXPECT_EQ(log.add(bytes_of(1)), 0xfffffffeu);
  EXPECT_EQ(log.add(bytes_of(2)), 0xffffffffu);
  EXPECT_EQ(log.add(bytes_of(3)), 0u);
  log.applied(0xffffffffu);  // the first was applied
  ASSERT_EQ(log.size(), 2u);
  EXPECT_EQ(log.pending().front().seq, 0xffffffffu);
  log.applied(0xfffffffeu);  // an older answer changes nothing
  EXPECT_EQ(log.size(), 2u);
  log.applied(1);
  EXPECT_EQ(log.size(), 0u);
}

TEST(RailSequence, TheWindowAppliesInOrderOnceEach) {
  MessageWindow w(0xffffffffu);
  const std::vector<uint8_t> m = bytes_of(42);
  EXPECT_EQ(w.arrive(1, m.data(), m.size()), MessageWindow::Fate::Early);
  const std::vector<uint8_t> again = bytes_of(43);  // held already: held as it comes now
  EXPECT_EQ(w.arrive(1, again.data(), again.size()), MessageWindow::Fate::Early);
  EXPECT_EQ(w.early(), 1u);
  std::vector<uint8_t> got;
  EXPECT_FALSE(w.due(&got));  // 0xffffffff and 0 missing
  EXPECT_EQ(w.arrive(0xffffffffu, m.data(), m.size()), MessageWindow::Fate::Apply);
  EXPECT_FALSE(w.due(&got));  // 0 still missing
  EXPECT_EQ(w.arrive(0, m.data(), m.size()), MessageWindow::Fate::Apply);
  ASSERT_TRUE(w.due(&got));
  EXPECT_EQ(value_of(got), 43u);
  EXPECT_FALSE(w.due(&got));
  EXPECT_EQ(w.next(), 2u);
  EXPECT_EQ(w.arrive(0xffffffffu, m.data(), m.size()), MessageWindow::Fate::Duplicate);
  EXPECT_EQ(w.early(), 0u);
}

TEST(RailSequence, RepliesOfFetchingAtomicsAreRemembered) {
  MessageWindow w;
  for (uint32_t s = 0; s < 100; ++s) w.answered(s, 1000 + s);
  uint64_t v = 0;
  EXPECT_TRUE(w.answer(99, &v));
  EXPECT_EQ(v, 1099u);
  EXPECT_TRUE(w.answer(100 - MessageWindow::kAnswers, &v));
  EXPECT_FALSE(w.answer(99 - MessageWindow::kAnswers, &v));  // forgotten: too old
}

TEST(RailSequence, AFullWindowDropsWhatComesEarly) {
  MessageWindow w;
  const std::vector<uint8_t> m = bytes_of(1);
  for (uint32_t s = 1; s <= MessageWindow::kMaxEarly; ++s)
    ASSERT_EQ(w.arrive(s, m.data(), m.size()), MessageWindow::Fate::Early);
  EXPECT_EQ(w.arrive(MessageWindow::kMaxEarly + 1, m.data(), m.size()),
            MessageWindow::Fate::Dropped);
  EXPECT_EQ(w.arrive(0, m.data(), m.size()), MessageWindow::Fate::Apply);
  std::vector<uint8_t> got;
  size_t released = 0;
  while (w.due(&got)) ++released;
  EXPECT_EQ(released, MessageWindow::kMaxEarly);
}

// A sender streams messages to one target over `nlanes` fake lanes: adds to a word, and
// fetch-adds (even operation numbers) whose answers it checks. Each message goes on a random
// lane that is up (lanes overtake each other), arrives after a random delay, and is answered
// (the target's next(), and a fetch-add's value) after another. At `fail_at` the last lane
// fails: what it had not delivered, and the answers it had not brought back, are lost; the
// sender notices later and sends its whole log again on the lanes that are up, with the
// fetch-adds whose answers it has not had.
void run_stream(uint64_t seed, int nlanes, bool fail) {
  SCOPED_TRACE("seed " + std::to_string(seed) + ", " + std::to_string(nlanes) + " lanes");
  std::mt19937_64 rng(seed);
  auto u = [&] { return std::uniform_real_distribution<double>(0, 1)(rng); };
  struct Event {
    double time;
    bool answer;
    int lane;
    uint32_t seq;
    uint64_t op;      // the message's operation
    uint32_t next;    // an answer: the target's next()
    bool has_found;   // an answer to a fetch-add: what it found
    uint64_t found;
    bool operator>(const Event& o) const { return time > o.time; }
  };
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events;
  const uint32_t first = 0xffffff00u;  // wraps around during the run
  MessageLog log(first);
  MessageWindow window(first);
  std::vector<bool> up(static_cast<size_t>(nlanes), true);
  const int failing = nlanes - 1;
  const double fail_at = fail ? 200 : -1, noticed_at = fail_at + 30;
  bool failed = false, resent = false;
  uint64_t word = 0;
  std::vector<uint64_t> applied;        // operations, in the order applied
  std::vector<int64_t> found(600, -1);  // [op]: what a fetch-add found, as answered
  size_t duplicates = 0, early = 0, wrong_answers = 0;
  // Fetch-adds not answered yet, by operation: their number. (The transport waits for each:
  // where its answer is lost, it sends it again, applied or not.)
  std::map<uint64_t, uint32_t> waiting;
  double now = 0;
  auto later = [&] { return now + 1 + 20 * u(); };
  auto send = [&](uint32_t seq, uint64_t op) {
    int lane;
    do lane = static_cast<int>(rng() % static_cast<uint64_t>(nlanes));
    while (!up[static_cast<size_t>(lane)]);
    events.push(Event{later(), false, lane, seq, op, 0, false, 0});
  };
  auto apply = [&](uint64_t op) {
    applied.push_back(op);
    const uint64_t before = word;
    word += op + 1;
    return before;
  };
  auto answer = [&](int lane, uint32_t seq, uint64_t op, bool has_found, uint64_t value) {
    events.push(Event{later(), true, lane, seq, op, window.next(), has_found, value});
  };
  auto handle = [&](const Event& e) {
    now = e.time;
    if (fail && e.lane == failing && e.time >= fail_at) return;  // lost with the lane
    if (e.answer) {
      log.applied(e.next);
      if (e.has_found) {
        const int64_t v = static_cast<int64_t>(e.found);
        if (found[e.op] >= 0 && found[e.op] != v) ++wrong_answers;
        found[e.op] = v;
        waiting.erase(e.op);
      }
      return;
    }
    const std::vector<uint8_t> m = bytes_of(e.op);
    switch (window.arrive(e.seq, m.data(), m.size())) {
      case MessageWindow::Fate::Apply: {
        const uint64_t r = apply(e.op);
        if (e.op % 2 == 0) window.answered(e.seq, r);
        answer(e.lane, e.seq, e.op, e.op % 2 == 0, r);
        std::vector<uint8_t> held;
        for (uint32_t s = window.next(); window.due(&held); s = window.next()) {
          const uint64_t op = value_of(held);
          const uint64_t r2 = apply(op);
          if (op % 2 == 0) window.answered(s, r2);
          answer(e.lane, s, op, op % 2 == 0, r2);
        }
        return;
      }
      case MessageWindow::Fate::Duplicate: {
        ++duplicates;
        uint64_t r = 0;
        const bool has = e.op % 2 == 0 && window.answer(e.seq, &r);
        answer(e.lane, e.seq, e.op, has, r);
        return;
      }
      case MessageWindow::Fate::Early:
        ++early;
        return;  // answered when applied
      case MessageWindow::Fate::Dropped:
        FAIL() << "the window overflowed";
    }
  };
  const uint64_t ops = 500;
  for (uint64_t op = 0; op < ops; ++op) {
    while (!events.empty() && events.top().time <= static_cast<double>(op)) {
      const Event e = events.top();
      events.pop();
      handle(e);
    }
    now = static_cast<double>(op);
    if (fail && !failed && now >= fail_at) failed = true;
    if (failed && !resent && now >= noticed_at) {
      // The sender notices: the lane is down, and its whole log goes again.
      resent = true;
      up[static_cast<size_t>(failing)] = false;
      std::set<uint32_t> again;
      for (const MessageLog::Entry& en : log.pending()) {
        send(en.seq, value_of(en.message));
        again.insert(en.seq);
      }
      for (const auto& [op2, seq] : waiting)
        if (!again.count(seq)) send(seq, op2);
    }
    const uint32_t seq = log.add(bytes_of(op));
    if (op % 2 == 0) waiting[op] = seq;
    send(seq, op);
  }
  while (!events.empty()) {
    const Event e = events.top();
    events.pop();
    handle(e);
  }
  std::vector<uint64_t> want(ops);
  for (uint64_t op = 0; op < ops; ++op) want[op] = op;
  EXPECT_EQ(applied, want) << "not every message applied once, in order";
  EXPECT_EQ(word, ops * (ops + 1) / 2);
  EXPECT_EQ(window.early(), 0u);
  EXPECT_EQ(wrong_answers, 0u) << "a replay answered with another value";
  for (uint64_t op = 0; op < ops; op += 2)
    EXPECT_EQ(found[op], static_cast<int64_t>(op * (op + 1) / 2)) << "fetch-add " << op;
  EXPECT_GT(early, 0u) << "lanes never overtook each other";
  EXPECT_EQ(log.size(), 0u) << "messages never reported applied";
  if (fail) {
    EXPECT_GT(duplicates, 0u) << "the failure replayed nothing that had been applied";
  }
}

TEST(RailSequence, EveryMessageOnceInOrderOverLanesThatOvertake) {
  for (uint64_t seed : {1, 2, 3})
    for (int lanes : {2, 3}) run_stream(seed, lanes, false);
}

TEST(RailSequence, ALaneFailsUnderTheMessages) {
  for (uint64_t seed : {4, 5, 6})
    for (int lanes : {2, 3, 4}) run_stream(seed, lanes, true);
}

}  // namespace
}  // namespace symcomm::rails
