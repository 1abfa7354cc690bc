// How many OpenMP threads a rank uses, and following the cores that other processes leave free.
//
// OpenMP splits each operation evenly over the threads and waits for the slowest. When another
// process holds one of the cores, the thread sharing that core gets a fraction of it, every
// one of the many parallel regions of a step waits for it (libgomp's threads spin meanwhile),
// and a 2-thread step can take 10-100x as long as a 1-thread one (bench/NOTES.md, "titan when
// other processes share the cores"). ThreadGovernor measures how busy this rank's cores are
// with work from outside this node's titan ranks (this process and its sibling ranks: the
// processes of the same executable with the same parent, as a launcher, torchrun, srun or
// mpirun starts them), shares the free cores between the node's ranks, and runs with that many
// threads (at least one), back up to the configured count once the cores are free again.
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
/// ranks of this node (at least 1). A rank pinned to cores of its own (taskset, srun
/// --cpu-bind) should set OMP_NUM_THREADS.
int configured_threads(int local_world_size);

/// The threads for each of this node's `local_ranks` ranks when `outside_cores` of the `cores`
/// they may run on were busy with other processes: the free cores rounded to the nearest whole
/// number, shared evenly (rounded down), between 1 and `max_threads`.
int threads_for_free_cores(double cores, double outside_cores, int local_ranks, int max_threads);

/// CPU time on this process's cores between two readings.
class CpuUsage {
 public:
  /// Takes the first reading. `with_siblings`: count this node's other ranks (same executable,
  /// same parent process) as this rank's own work.
  explicit CpuUsage(bool with_siblings = false);

  struct Window {
    double wall_s = 0;
    double cores = 0;         // cores this process may run on (its affinity mask)
    double busy_cores = 0;    // average cores busy on them, any process (steal time included)
    double self_cores = 0;    // average cores this process used
    double family_cores = 0;  // this process and, with siblings, this node's other ranks
    double outside_cores() const {
      return busy_cores > family_cores ? busy_cores - family_cores : 0;
    }
  };
  /// The window since the previous reading; starts the next one.
  Window next();

 private:
  struct Reading {
    std::chrono::steady_clock::time_point wall;
    double busy_s = 0;    // busy seconds summed over this process's cores (/proc/stat)
    double self_s = 0;    // CPU seconds of this process
    double family_s = 0;  // CPU seconds of this process and its sibling ranks
  };
  Reading read() const;

  std::vector<int> cpus_;
  bool with_siblings_;
  Reading last_;
};

/// Sets the thread count at start and adapts it while the run goes (see the top of this file).
/// A monitor thread measures the cores outside work used over each second and decides the
/// count; the training thread applies it at the next apply() (OpenMP's thread count belongs to
/// the thread that sets it). A step stuck at the wrong count can take minutes, so the trainer
/// calls apply() at every block boundary, forward and backward, not only between steps.
class ThreadGovernor {
 public:
  /// `local_ranks`: this node's titan ranks, which share the free cores. `adapt` false keeps
  /// `max_threads` for the whole run (training.deterministic: results may depend on how
  /// reductions are split across threads); so does max_threads 1.
  ThreadGovernor(int max_threads, int local_ranks, bool adapt);
  ~ThreadGovernor();
  ThreadGovernor(const ThreadGovernor&) = delete;
  ThreadGovernor& operator=(const ThreadGovernor&) = delete;

  /// On the training thread: switches to the count the monitor last decided, if it differs,
  /// and logs why. Cheap when nothing changed (one atomic load).
  void apply();
  int threads() const { return threads_; }
  int max_threads() const { return max_threads_; }
  /// Whether the count follows the free cores (a monitor runs).
  bool adapts() const { return monitor_.joinable(); }

 private:
  void monitor();

  // What the monitor decided, from which window.
  struct Decision {
    int threads = 1;
    double outside_cores = 0;
    double cores = 0;
  };

  int max_threads_;
  int local_ranks_;
  int threads_;
  std::atomic<int> wanted_;
  Decision decision_;  // guarded by mutex_
  std::mutex mutex_;
  std::condition_variable stop_cv_;
  bool stop_ = false;
  std::thread monitor_;
};

}  // namespace titan::platform
