// The thread governor: the decision from free cores, the CPU accounting it reads (another
// process's busy core counts as other work, this process's own work does not), and a governor
// that gives a core back while a competing process spins. The checks hold on any core count
// and under extra load from other tests: they bound from the side that load cannot push.
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <torch/torch.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "support/skip.h"
#include "titan/platform/cpu_threads.h"

namespace titan::platform {
namespace {

using Clock = std::chrono::steady_clock;

/// A child process that keeps one core busy until the guard goes out of scope.
class Spinner {
 public:
  Spinner() : pid_(fork()) {
    if (pid_ == 0) {
      for (;;) {
      }
    }
  }
  ~Spinner() {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }

 private:
  pid_t pid_;
};

int allowed_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  sched_getaffinity(0, sizeof(set), &set);
  return CPU_COUNT(&set);
}

double rusage_cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  auto s = [](timeval t) { return static_cast<double>(t.tv_sec) + t.tv_usec * 1e-6; };
  return s(u.ru_utime) + s(u.ru_stime);
}

TEST(ThreadsForFreeCores, RoundsTheFreeCoresWithinOneAndTheMaximum) {
  EXPECT_EQ(threads_for_free_cores(2, 0.0, 2), 2);
  EXPECT_EQ(threads_for_free_cores(2, 0.3, 2), 2);   // a daemon's blip keeps both
  EXPECT_EQ(threads_for_free_cores(2, 0.7, 2), 1);   // a competitor sharing a core
  EXPECT_EQ(threads_for_free_cores(2, 1.0, 2), 1);
  EXPECT_EQ(threads_for_free_cores(2, 2.6, 2), 1);   // never below one
  EXPECT_EQ(threads_for_free_cores(16, 2.0, 4), 4);  // never above the configured count
  EXPECT_EQ(threads_for_free_cores(8, 5.2, 4), 3);   // this node's other ranks count as other
}

TEST(CpuUsage, AnotherProcessesBusyCoreIsOtherWork) {
  CpuUsage usage;
  {
    Spinner spinner;
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  }
  auto w = usage.next();
  EXPECT_GE(w.cores, 1);
  EXPECT_GT(w.wall_s, 1.4);
  EXPECT_GE(w.other_cores(), 0.7) << "busy " << w.busy_cores << " self " << w.self_cores;
  EXPECT_LT(w.self_cores, 0.2);
}

TEST(CpuUsage, ThisProcessesWorkIsItsOwn) {
  CpuUsage usage;
  const double cpu_before = rusage_cpu_seconds();
  const auto start = Clock::now();
  volatile double x = 0;
  while (Clock::now() - start < std::chrono::seconds(1)) x = x + 1;
  const double cpu = rusage_cpu_seconds() - cpu_before;
  auto w = usage.next();
  EXPECT_NEAR(w.self_cores, cpu / w.wall_s, 0.05);
  EXPECT_GT(w.self_cores, 0.3);  // it got at least a third of a core, even on a loaded machine
  EXPECT_LT(w.other_cores(), w.busy_cores - 0.25);  // its own work is not counted as other
  // The machine's count includes this process's work (5 ms ticks of slack).
  EXPECT_GE(w.busy_cores, w.self_cores - 0.05);
}

TEST(ThreadGovernor, GivesACoreBackWhileAnotherProcessSpins) {
  const int cores = allowed_cores();
  if (cores < 2) TITAN_SKIP_OR_FAIL("one core: nothing to give back");
  ThreadGovernor governor(cores, /*adapt=*/true);
  governor.apply();
  ASSERT_EQ(torch::get_num_threads(), cores);
  Spinner spinner;
  // The monitor decides once a second; apply() picks the decision up on this thread.
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (governor.threads() == cores && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    governor.apply();
  }
  EXPECT_LT(governor.threads(), cores);
  EXPECT_GE(governor.threads(), 1);
  EXPECT_EQ(torch::get_num_threads(), governor.threads());
}

TEST(ThreadGovernor, KeepsItsThreadsWhenNotAdapting) {
  const int cores = std::max(2, allowed_cores());
  ThreadGovernor governor(cores, /*adapt=*/false);
  Spinner spinner;
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  governor.apply();
  EXPECT_EQ(governor.threads(), cores);
  EXPECT_EQ(torch::get_num_threads(), cores);
}

}  // namespace
}  // namespace titan::platform
