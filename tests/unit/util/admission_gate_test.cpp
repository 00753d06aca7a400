#include "util/admission_gate.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

namespace spark::util {
namespace {

// Polls until `done` holds (no wall-clock bound: ctest's timeout is the bound).
template <class F>
void wait_until(F done) {
  while (!done()) std::this_thread::yield();
}

TEST(AdmissionGate, RunsUpToTheLimitQueuesUpToTheLineAndTurnsAwayTheRest) {
  AdmissionGate gate(1, 1);
  auto first = gate.enter();
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(gate.running(), 1u);
  std::atomic<bool> second_in{false};
  std::thread second([&] {
    auto t = gate.enter();
    EXPECT_TRUE(t.has_value());
    second_in = true;
  });
  wait_until([&] { return gate.waiting() == 1; });
  EXPECT_FALSE(second_in);
  // The line is full: a third caller is refused at once.
  EXPECT_FALSE(gate.enter().has_value());
  first.reset();  // the place frees: the waiting caller takes it, then leaves
  second.join();
  EXPECT_TRUE(second_in);
  EXPECT_EQ(gate.running(), 0u);
  EXPECT_EQ(gate.waiting(), 0u);
  EXPECT_TRUE(gate.enter().has_value());
}

TEST(AdmissionGate, RaisingTheLimitLetsWaitersIn) {
  AdmissionGate gate(1, 4);
  auto first = gate.enter();
  std::atomic<int> in{0};
  std::thread a([&] {
    auto t = gate.enter();
    ++in;
    wait_until([&] { return in == 3; });
  });
  std::thread b([&] {
    auto t = gate.enter();
    ++in;
    wait_until([&] { return in == 3; });
  });
  wait_until([&] { return gate.waiting() == 2; });
  gate.set_limits(3, 4);
  wait_until([&] { return in == 2; });
  EXPECT_EQ(gate.running(), 3u);
  ++in;
  a.join();
  b.join();
  EXPECT_EQ(gate.running(), 1u);
}

TEST(AdmissionGate, APlaceInLineCountsAgainstTheLineAndNeverRuns) {
  // A caller waiting for another's work (the same grammar) holds a place in the line: the line's bound
  // covers it, and leaving frees no running place.
  AdmissionGate gate(1, 2);
  auto running = gate.enter();
  auto in_line = gate.stand_in_line();
  ASSERT_TRUE(in_line.has_value());
  EXPECT_EQ(gate.waiting(), 1u);
  EXPECT_EQ(gate.running(), 1u);
  std::thread queued([&] { auto t = gate.enter(); });
  wait_until([&] { return gate.waiting() == 2; });
  EXPECT_FALSE(gate.stand_in_line().has_value());  // the line is full
  EXPECT_FALSE(gate.enter().has_value());
  in_line.reset();
  EXPECT_EQ(gate.waiting(), 1u);
  EXPECT_EQ(gate.running(), 1u);  // the queued caller still waits for the running place
  running.reset();
  queued.join();
  EXPECT_EQ(gate.running(), 0u);
  EXPECT_EQ(gate.waiting(), 0u);
}

TEST(AdmissionGate, TryEnterTakesOnlyAFreePlace) {
  AdmissionGate gate(1, 0);  // no line at all
  EXPECT_FALSE(gate.stand_in_line().has_value());
  auto first = gate.try_enter();
  ASSERT_TRUE(first.has_value());
  EXPECT_FALSE(gate.try_enter().has_value());  // taken: no waiting
  first.reset();
  EXPECT_TRUE(gate.try_enter().has_value());
  EXPECT_EQ(gate.running(), 0u);
}

}  // namespace
}  // namespace spark::util
