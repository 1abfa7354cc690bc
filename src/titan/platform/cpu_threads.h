// How many OpenMP threads a rank uses, and following the cores that other processes leave free.
//
// OpenMP splits each operation evenly over the threads and waits for the slowest. When another
// process holds one of the cores, the thread sharing that core gets a fraction of it, every
// one of the many parallel regions of a step waits for it (libgomp's threads spin meanwhile),
// and a 2-thread step can take 10-100x as long as a 1-thread one (bench/NOTES.md, "titan when
// other processes share the cores"). ThreadGovernor measures how busy this rank's cores are
// with work other than its own and runs with that many fewer threads (at least one), back up
// to the configured count once the cores are free again.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace titan::platform {

/// OMP_NUM_THREADS when set (> 0), else the cores this process may run on divided by the
/// ranks of this node (at least 1).
int configured_threads(int local_world_size);

/// The threads to use when `other_cores` of the `cores` this rank may run on were busy with
/// other processes (this node's other ranks included): the free cores rounded to the nearest
/// whole number, between 1 and `max_threads`.
int threads_for_free_cores(double cores, double other_cores, int max_threads);

/// CPU time on this process's cores between two readings.
class CpuUsage {
 public:
  /// Takes the first reading.
  CpuUsage();

  struct Window {
    double wall_s = 0;
    double cores = 0;        // cores this process may run on (its affinity mask)
    double busy_cores = 0;   // average cores busy on them, any process (steal time included)
    double self_cores = 0;   // average cores this process used
    double other_cores() const { return busy_cores > self_cores ? busy_cores - self_cores : 0; }
  };
  /// The window since the previous reading; starts the next one.
  Window next();

 private:
  struct Reading {
    std::chrono::steady_clock::time_point wall;
    double busy_s = 0;  // busy seconds summed over this process's cores (/proc/stat)
    double self_s = 0;  // CPU seconds of this process
  };
  Reading read() const;

  std::vector<int> cpus_;
  Reading last_;
};

/// Sets the thread count at start and adapts it while the run goes (see the top of this file).
/// A monitor thread measures the cores other processes used over each second and decides the
/// count; the training thread applies it at the next apply() (OpenMP's thread count belongs to
/// the thread that sets it). A step stuck at the wrong count can take minutes, so the trainer
/// calls apply() at every block boundary, forward and backward, not only between steps.
class ThreadGovernor {
 public:
  /// `adapt` false keeps `max_threads` for the whole run (training.deterministic: results
  /// may depend on how reductions are split across threads); so does max_threads 1.
  ThreadGovernor(int max_threads, bool adapt);
  ~ThreadGovernor();
  ThreadGovernor(const ThreadGovernor&) = delete;
  ThreadGovernor& operator=(const ThreadGovernor&) = delete;

  /// On the training thread: switches to the count the monitor last decided, if it differs,
  /// and logs why. Cheap when nothing changed (one atomic load).
  void apply();
  int threads() const { return threads_; }

 private:
  void monitor();

  int max_threads_;
  int threads_;
  std::atomic<int> wanted_;
  std::atomic<double> other_cores_{0};
  std::atomic<double> cores_{0};
  std::mutex mutex_;
  std::condition_variable stop_cv_;
  bool stop_ = false;
  std::thread monitor_;
};

}  // namespace titan::platform
