// The host side of the GPU-to-proxy ring (transport/device_ring.h) over plain memory: a
// poster here does what a kernel does (symcomm/detail/device_ring.cuh): take a ticket, wait
// for its slot's turn, write the fields, then the ticket.
#include "transport/device_ring.h"

#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <thread>
#include <vector>

namespace symcomm {
namespace {

constexpr uint64_t kCapacity = 8;

struct Ring {
  std::vector<DeviceNetOp> slots = std::vector<DeviceNetOp>(kCapacity, DeviceNetOp{});
  uint64_t freed = 0, done = 0;
  std::atomic<uint64_t> tail{0};
  RingReader reader{slots.data(), kCapacity, &freed, &done};

  // Takes a ticket; returns it.
  uint64_t take() { return tail.fetch_add(1); }
  // Whether ticket t's slot is free to write.
  bool free_for(uint64_t t) const {
    return t < kCapacity || __atomic_load_n(&freed, __ATOMIC_ACQUIRE) >= t - kCapacity + 1;
  }
  void write(uint64_t t, int pe, uint64_t value) {
    DeviceNetOp& s = slots[t % kCapacity];
    s.kind = kDeviceNetSignal;
    s.pe = pe;
    s.value = value;
    __atomic_store_n(&s.ticket, t + 1, __ATOMIC_RELEASE);
  }
};

TEST(DeviceRing, OperationsAreReadInTicketOrderOnceEach) {
  Ring r;
  std::vector<uint64_t> seen;
  auto run = [&](const DeviceNetOp& op) { seen.push_back(op.value); };
  EXPECT_FALSE(r.reader.poll(run)) << "an empty ring";
  const uint64_t t0 = r.take(), t1 = r.take(), t2 = r.take();
  r.write(t1, 3, 101);  // published out of order: ticket 1 before ticket 0
  EXPECT_FALSE(r.reader.poll(run)) << "ticket 1 is there, ticket 0 is not";
  r.write(t0, 3, 100);
  r.write(t2, 3, 102);
  while (r.reader.poll(run)) {
  }
  EXPECT_EQ(seen, (std::vector<uint64_t>{100, 101, 102}));
  EXPECT_EQ(r.freed, 3u);
  EXPECT_EQ(r.done, 3u);
  EXPECT_FALSE(r.reader.poll(run)) << "nothing is read twice";
}

TEST(DeviceRing, ASlotOfTheLastLapIsNotReadAgain) {
  Ring r;
  std::vector<uint64_t> seen;
  auto run = [&](const DeviceNetOp& op) { seen.push_back(op.value); };
  for (uint64_t i = 0; i < kCapacity; ++i) r.write(r.take(), 1, i);
  while (r.reader.poll(run)) {
  }
  ASSERT_EQ(seen.size(), kCapacity);
  // Slot 0 still holds ticket 0's descriptor: ticket kCapacity's is not there yet.
  EXPECT_FALSE(r.reader.poll(run));
  const uint64_t t = r.take();
  ASSERT_TRUE(r.free_for(t));
  r.write(t, 1, 999);
  EXPECT_TRUE(r.reader.poll(run));
  EXPECT_EQ(seen.back(), 999u);
}

TEST(DeviceRing, AFailedOperationIsCountedDoneAndItsErrorGoesOn) {
  Ring r;
  r.write(r.take(), 2, 7);
  r.write(r.take(), 2, 8);
  EXPECT_THROW(r.reader.poll([](const DeviceNetOp&) { throw std::runtime_error("lost"); }),
               std::runtime_error);
  EXPECT_EQ(r.done, 1u) << "the kernel waiting for it goes on";
  EXPECT_EQ(r.freed, 1u);
  uint64_t value = 0;
  EXPECT_TRUE(r.reader.poll([&](const DeviceNetOp& op) { value = op.value; }));
  EXPECT_EQ(value, 8u);
  EXPECT_EQ(r.done, 2u);
}

// Posters on threads, more operations than slots: each waits for its slot's turn, as a
// kernel does, while the reader runs; every operation is read once, in ticket order.
TEST(DeviceRing, PostersWaitForFreedSlots) {
  Ring r;
  constexpr int kThreads = 4, kEach = 500;
  std::atomic<bool> stop{false};
  std::vector<uint64_t> order;
  std::thread reader([&] {
    while (!stop.load() || r.reader.next() < r.tail.load())
      r.reader.poll([&](const DeviceNetOp& op) { order.push_back(op.value); });
  });
  std::vector<std::thread> posters;
  for (int k = 0; k < kThreads; ++k)
    posters.emplace_back([&, k] {
      for (int i = 0; i < kEach; ++i) {
        const uint64_t t = r.take();
        while (!r.free_for(t)) std::this_thread::yield();
        r.write(t, k, t);
      }
    });
  for (auto& p : posters) p.join();
  stop.store(true);
  reader.join();
  ASSERT_EQ(order.size(), static_cast<size_t>(kThreads * kEach));
  for (size_t i = 0; i < order.size(); ++i) ASSERT_EQ(order[i], i) << "the value is its ticket";
  EXPECT_EQ(r.done, order.size());
}

// A put-signal's payload travels in its descriptor: the reader's copy holds it whole, and
// the slot may be written again before the operation runs on.
TEST(DeviceRing, AnInlinePayloadIsReadWithItsDescriptor) {
  Ring r;
  const uint64_t t = r.take();
  DeviceNetOp& s = r.slots[t % kCapacity];
  s.kind = kDeviceNetPutSignalInline;
  s.pe = 1;
  s.bytes = kDeviceNetInlineBytes;
  for (uint64_t i = 0; i < kDeviceNetInlineBytes; ++i) s.data[i] = static_cast<uint8_t>(3 * i + 1);
  __atomic_store_n(&s.ticket, t + 1, __ATOMIC_RELEASE);
  std::vector<uint8_t> got;
  EXPECT_TRUE(r.reader.poll([&](const DeviceNetOp& op) {
    EXPECT_EQ(op.kind, kDeviceNetPutSignalInline);
    EXPECT_EQ(r.freed, 1u) << "the slot is freed before the operation runs";
    s.data[0] = 0xEE;  // a poster that reuses the slot changes nothing of this operation
    got.assign(op.data, op.data + op.bytes);
  }));
  ASSERT_EQ(got.size(), kDeviceNetInlineBytes);
  for (uint64_t i = 0; i < kDeviceNetInlineBytes; ++i)
    EXPECT_EQ(got[i], static_cast<uint8_t>(3 * i + 1)) << "byte " << i;
}

TEST(DeviceRing, ACapacityThatIsNoPowerOfTwoIsRefused) {
  std::vector<DeviceNetOp> slots(6);
  uint64_t freed = 0, done = 0;
  EXPECT_ANY_THROW(RingReader(slots.data(), 6, &freed, &done));
}

}  // namespace
}  // namespace symcomm
