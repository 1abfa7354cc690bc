#include "titan/platform/cpu_threads.h"

#include <sched.h>
#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <ctime>
#include <fstream>
#include <sstream>
#include <thread>

#include "titan/platform/logging.h"

namespace titan::platform {
namespace {

constexpr std::chrono::seconds kWindow{1};

std::vector<int> allowed_cpus() {
  std::vector<int> cpus;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &set)) cpus.push_back(c);
    }
  }
  return cpus;
}

/// Busy seconds (user, nice, system, irq, softirq, steal) summed over `cpus`, from /proc/stat.
double busy_seconds(const std::vector<int>& cpus) {
  static const double ticks_per_s = static_cast<double>(sysconf(_SC_CLK_TCK));
  std::ifstream stat("/proc/stat");
  std::string line;
  double ticks = 0;
  while (std::getline(stat, line)) {
    if (line.rfind("cpu", 0) != 0 || line.size() < 4 ||
        !std::isdigit(static_cast<unsigned char>(line[3]))) {
      continue;
    }
    std::istringstream fields(line.substr(3));
    int cpu = -1;
    int64_t user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
    fields >> cpu >> user >> nice >> system >> idle >> iowait >> irq >> softirq >> steal;
    if (std::find(cpus.begin(), cpus.end(), cpu) == cpus.end()) continue;
    ticks += static_cast<double>(user + nice + system + irq + softirq + steal);
  }
  return ticks / ticks_per_s;
}

double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

struct ProcStat {
  pid_t parent = 0;
  double cpu_s = 0;  // user + system
};

/// /proc/<pid>/stat's parent pid and CPU seconds; false when the process is gone.
bool read_proc_stat(const std::string& pid, ProcStat& out) {
  std::ifstream in("/proc/" + pid + "/stat");
  std::string stat;
  if (!std::getline(in, stat)) return false;
  const auto close = stat.rfind(')');  // the command name may hold spaces and parentheses
  if (close == std::string::npos) return false;
  std::istringstream fields(stat.substr(close + 2));
  std::string state;
  int64_t ppid = 0, skip = 0, utime = 0, stime = 0;
  fields >> state >> ppid;
  for (int i = 0; i < 9; ++i) fields >> skip;  // pgrp .. cmajflt
  fields >> utime >> stime;
  static const double ticks_per_s = static_cast<double>(sysconf(_SC_CLK_TCK));
  out.parent = static_cast<pid_t>(ppid);
  out.cpu_s = static_cast<double>(utime + stime) / ticks_per_s;
  return static_cast<bool>(fields);
}

/// CPU seconds of this process's sibling ranks: the other processes with the same parent that
/// run the same executable.
double sibling_cpu_seconds() {
  namespace fs = std::filesystem;
  std::error_code ec;
  const auto self_exe = fs::read_symlink("/proc/self/exe", ec);
  const pid_t parent = getppid();
  const std::string self = std::to_string(getpid());
  double total = 0;
  for (const auto& entry : fs::directory_iterator("/proc", ec)) {
    const std::string pid = entry.path().filename().string();
    if (pid.empty() || !std::isdigit(static_cast<unsigned char>(pid[0])) ||
        pid == self) {
      continue;
    }
    ProcStat stat;
    if (!read_proc_stat(pid, stat) || stat.parent != parent) continue;
    std::error_code exe_ec;
    if (fs::read_symlink(entry.path() / "exe", exe_ec) == self_exe && !exe_ec) total += stat.cpu_s;
  }
  return total;
}

}  // namespace

int configured_threads(int local_world_size) {
  const char* env = std::getenv("OMP_NUM_THREADS");
  int threads = env ? std::atoi(env) : 0;
  if (threads > 0) return threads;
  int cores = static_cast<int>(allowed_cpus().size());
  if (cores == 0) cores = static_cast<int>(std::thread::hardware_concurrency());
  return std::max(1, cores / std::max(1, local_world_size));
}

int threads_for_free_cores(double cores, double outside_cores, int local_ranks,
                           int max_threads) {
  const auto free = static_cast<int>(std::lround(cores - outside_cores));
  return std::clamp(free / std::max(1, local_ranks), 1, std::max(1, max_threads));
}

CpuUsage::CpuUsage(bool with_siblings)
    : cpus_(allowed_cpus()), with_siblings_(with_siblings), last_(read()) {}

CpuUsage::Reading CpuUsage::read() const {
  Reading r{std::chrono::steady_clock::now(), busy_seconds(cpus_), process_cpu_seconds(), 0};
  r.family_s = r.self_s + (with_siblings_ ? sibling_cpu_seconds() : 0.0);
  return r;
}

CpuUsage::Window CpuUsage::next() {
  Reading now = read();
  Window w;
  w.wall_s = std::chrono::duration<double>(now.wall - last_.wall).count();
  w.cores = static_cast<double>(cpus_.size());
  if (w.wall_s > 0) {
    w.busy_cores = (now.busy_s - last_.busy_s) / w.wall_s;
    w.self_cores = (now.self_s - last_.self_s) / w.wall_s;
    // A sibling that exited or started within the window would make this negative or large.
    w.family_cores = std::max(w.self_cores, (now.family_s - last_.family_s) / w.wall_s);
  }
  last_ = now;
  return w;
}

ThreadGovernor::ThreadGovernor(int max_threads, int local_ranks, bool adapt)
    : max_threads_(std::max(1, max_threads)),
      local_ranks_(std::max(1, local_ranks)),
      threads_(max_threads_),
      wanted_(max_threads_) {
  torch::set_num_threads(threads_);
  if (adapt && max_threads_ > 1) monitor_ = std::thread([this] { monitor(); });
}

ThreadGovernor::~ThreadGovernor() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  stop_cv_.notify_all();
  if (monitor_.joinable()) monitor_.join();
}

void ThreadGovernor::monitor() {
  CpuUsage usage(/*with_siblings=*/local_ranks_ > 1);
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stop_cv_.wait_for(lock, kWindow, [this] { return stop_; })) {
    CpuUsage::Window w = usage.next();
    const double outside = w.outside_cores();
    decision_ = {threads_for_free_cores(w.cores, outside, local_ranks_, max_threads_), outside,
                 w.cores};
    wanted_ = decision_.threads;
  }
}

void ThreadGovernor::apply() {
  if (wanted_.load() == threads_) return;
  Decision d;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    d = decision_;
  }
  if (d.threads == threads_) return;
  log::info("Other processes kept {:.1f} of this rank's {:.0f} cores busy over the last second "
            "({} rank(s) of this node share the rest): {} OpenMP thread(s) from now on (was {}, "
            "at most {})",
            d.outside_cores, d.cores, local_ranks_, d.threads, threads_, max_threads_);
  threads_ = d.threads;
  torch::set_num_threads(threads_);
}

}  // namespace titan::platform
