// The thread governor: the decision from free cores, the CPU accounting it reads (another
// process's busy core counts as outside work, this process's and its sibling ranks' do not),
// and a governor that gives a core back while a competing process spins. The checks hold on any core count
// and under extra load from other tests: they bound from the side that load cannot push.
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <torch/torch.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

#include "support/skip.h"
#include "titan/platform/cpu_threads.h"

namespace titan::platform {
namespace unit_platform_cpu_threads_test {

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
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_;
};

int allowed_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  sched_getaffinity(0, sizeof(set), &set);
  return CPU_COUNT(&set);
}

/// CPU seconds (user + system) of process `pid` from /proc/<pid>/stat (fields 14 and 15).
double process_cpu_seconds(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  std::getline(in, stat);
  std::istringstream fields(stat.substr(stat.rfind(')') + 2));
  std::string field;
  for (int i = 3; i < 14; ++i) fields >> field;  // state .. cmajflt
  int64_t utime = 0, stime = 0;
  fields >> utime >> stime;
  return static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

double rusage_cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  auto s = [](timeval t) { return static_cast<double>(t.tv_sec) + t.tv_usec * 1e-6; };
  return s(u.ru_utime) + s(u.ru_stime);
}

TEST(ThreadsForFreeCores, SharesTheRoundedFreeCoresWithinOneAndTheMaximum) {
  EXPECT_EQ(threads_for_free_cores(2, 0.0, 1, 2), 2);
  EXPECT_EQ(threads_for_free_cores(2, 0.3, 1, 2), 2);   // a daemon's blip keeps both
  EXPECT_EQ(threads_for_free_cores(2, 0.7, 1, 2), 1);   // a competitor sharing a core
  EXPECT_EQ(threads_for_free_cores(2, 1.0, 1, 2), 1);
  EXPECT_EQ(threads_for_free_cores(2, 2.6, 1, 2), 1);   // never below one
  EXPECT_EQ(threads_for_free_cores(16, 2.0, 1, 4), 4);  // never above the configured count
  // Two ranks of 8 threads on 16 cores: quiet, both keep 8; one competing process leaves 15
  // free cores, 7 each (not 8 and 8 oversubscribed); the ranks' own work is never outside.
  EXPECT_EQ(threads_for_free_cores(16, 0.0, 2, 8), 8);
  EXPECT_EQ(threads_for_free_cores(16, 1.0, 2, 8), 7);
  EXPECT_EQ(threads_for_free_cores(16, 1.0, 2, 7), 7);  // stays: no flapping back to 8
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
  EXPECT_GE(w.outside_cores(), 0.7) << "busy " << w.busy_cores << " self " << w.self_cores;
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
  EXPECT_LT(w.outside_cores(), w.busy_cores - 0.25);  // its own work is not counted as outside
  // The machine's count includes this process's work (5 ms ticks of slack).
  EXPECT_GE(w.busy_cores, w.self_cores - 0.05);
}

// Two forked children are siblings (same parent, same executable), as a launcher's ranks are:
// the one measuring counts the other's spinning as its node's own work, not outside work.
TEST(CpuUsage, ASiblingRanksWorkIsThisNodesOwn) {
  Spinner sibling;
  const pid_t measurer = fork();
  if (measurer == 0) {
    // The family's CPU is this process's plus the sibling's, however much of a core the
    // sibling got on a loaded machine; it must have run at all for the check to mean something.
    CpuUsage usage(/*with_siblings=*/true);
    const double sibling_before = process_cpu_seconds(sibling.pid());
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    const auto w = usage.next();
    const double sibling_cores = (process_cpu_seconds(sibling.pid()) - sibling_before) / w.wall_s;
    const bool ok = sibling_cores > 0.05 &&
                    std::abs(w.family_cores - (w.self_cores + sibling_cores)) < 0.05;
    std::fprintf(stderr, "busy %.2f family %.2f self %.2f sibling %.2f\n", w.busy_cores,
                 w.family_cores, w.self_cores, sibling_cores);
    _exit(ok ? 0 : 1);
  }
  int status = 0;
  waitpid(measurer, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

TEST(ThreadGovernor, GivesACoreBackWhileAnotherProcessSpins) {
  const int cores = allowed_cores();
  if (cores < 2) TITAN_SKIP_OR_FAIL("one core: nothing to give back");
  ThreadGovernor governor(cores, 1, /*adapt=*/true);
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
  ThreadGovernor governor(cores, 1, /*adapt=*/false);
  Spinner spinner;
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  governor.apply();
  EXPECT_EQ(governor.threads(), cores);
  EXPECT_EQ(torch::get_num_threads(), cores);
}

}  // namespace unit_platform_cpu_threads_test
}  // namespace titan::platform
