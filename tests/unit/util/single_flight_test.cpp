#include "util/single_flight.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <memory>
#include <stdexcept>
#include <thread>
#include <vector>

namespace spark::util {
namespace {

// Polls until `done` holds (no wall-clock bound: ctest's timeout is the bound).
template <class F>
void wait_until(F done) {
  while (!done()) std::this_thread::yield();
}

// One caller runs `work` and holds it until released; `callers` more ask for the same key meanwhile.
struct Flight {
  SingleFlight<int> flight;
  std::atomic<int> runs{0};
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
};

TEST(SingleFlight, CallersOfOneKeyShareOneRun) {
  Flight f;
  const auto work = [&f] {
    ++f.runs;
    f.released.wait();
    return 42;
  };
  std::vector<std::thread> callers;
  std::atomic<int> sum{0};
  callers.emplace_back([&] { sum += f.flight.run("k", work); });
  wait_until([&] { return f.runs == 1; });
  for (int i = 0; i < 3; ++i) callers.emplace_back([&] { sum += f.flight.run("k", work); });
  wait_until([&] { return f.flight.waiting() == 3; });
  f.release.set_value();
  for (auto& t : callers) t.join();
  EXPECT_EQ(f.runs, 1);
  EXPECT_EQ(sum, 4 * 42);
  EXPECT_EQ(f.flight.waiting(), 0u);
  // Nothing is kept: a later call runs the work again.
  EXPECT_EQ(f.flight.run("k", work), 42);
  EXPECT_EQ(f.runs, 2);
}

TEST(SingleFlight, TheRunsExceptionReachesEveryWaiter) {
  Flight f;
  const auto work = [&f]() -> int {
    ++f.runs;
    f.released.wait();
    throw std::runtime_error("refused");
  };
  std::atomic<int> refused{0};
  const auto call = [&] {
    try {
      f.flight.run("k", work);
    } catch (const std::runtime_error& e) {
      refused += std::string(e.what()) == "refused";
    }
  };
  std::vector<std::thread> callers;
  callers.emplace_back(call);
  wait_until([&] { return f.runs == 1; });
  callers.emplace_back(call);
  callers.emplace_back(call);
  wait_until([&] { return f.flight.waiting() == 2; });
  f.release.set_value();
  for (auto& t : callers) t.join();
  EXPECT_EQ(f.runs, 1);
  EXPECT_EQ(refused, 3);
}

TEST(SingleFlight, AWaiterHoldsWhatItsAdmissionGaveOrIsTurnedAway) {
  Flight f;
  const auto work = [&f] {
    ++f.runs;
    f.released.wait();
    return 7;
  };
  std::atomic<int> held{0}, turned_away{0};
  const auto admit = [&]() -> std::shared_ptr<void> {
    if (held == 1) throw std::runtime_error("line full");
    ++held;
    return std::shared_ptr<void>(nullptr, [&held](void*) { --held; });
  };
  std::thread owner([&] { EXPECT_EQ(f.flight.run("k", work, admit), 7); });
  wait_until([&] { return f.runs == 1; });
  std::thread waiter([&] { EXPECT_EQ(f.flight.run("k", work, admit), 7); });
  wait_until([&] { return held == 1; });
  try {
    f.flight.run("k", work, admit);
  } catch (const std::runtime_error&) {
    ++turned_away;
  }
  EXPECT_EQ(turned_away, 1);
  EXPECT_EQ(f.flight.waiting(), 1u);  // the turned-away caller left the count
  f.release.set_value();
  owner.join();
  waiter.join();
  EXPECT_EQ(held, 0);  // released when the wait ended
  EXPECT_EQ(f.runs, 1);
}

TEST(SingleFlight, OtherKeysRunAtTheSameTime) {
  SingleFlight<int> flight;
  std::atomic<int> inside{0};
  const auto work = [&] {
    ++inside;
    wait_until([&] { return inside == 2; });  // both keys' runs are inside at once
    return 1;
  };
  std::thread a([&] { flight.run("a", work); });
  std::thread b([&] { flight.run("b", work); });
  a.join();
  b.join();
  EXPECT_EQ(flight.waiting(), 0u);
}

}  // namespace
}  // namespace spark::util
