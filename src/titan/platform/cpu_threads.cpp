#include "titan/platform/cpu_threads.h"

#include <sched.h>
#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
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
    if (line.rfind("cpu", 0) != 0 || line.size() < 4 || !std::isdigit(line[3])) continue;
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

}  // namespace

int configured_threads(int local_world_size) {
  const char* env = std::getenv("OMP_NUM_THREADS");
  int threads = env ? std::atoi(env) : 0;
  if (threads > 0) return threads;
  int cores = static_cast<int>(allowed_cpus().size());
  if (cores == 0) cores = static_cast<int>(std::thread::hardware_concurrency());
  return std::max(1, cores / std::max(1, local_world_size));
}

int threads_for_free_cores(double cores, double other_cores, int max_threads) {
  auto free = static_cast<int>(std::lround(cores - other_cores));
  return std::clamp(free, 1, std::max(1, max_threads));
}

CpuUsage::CpuUsage() : cpus_(allowed_cpus()), last_(read()) {}

CpuUsage::Reading CpuUsage::read() const {
  return {std::chrono::steady_clock::now(), busy_seconds(cpus_), process_cpu_seconds()};
}

CpuUsage::Window CpuUsage::next() {
  Reading now = read();
  Window w;
  w.wall_s = std::chrono::duration<double>(now.wall - last_.wall).count();
  w.cores = static_cast<double>(cpus_.size());
  if (w.wall_s > 0) {
    w.busy_cores = (now.busy_s - last_.busy_s) / w.wall_s;
    w.self_cores = (now.self_s - last_.self_s) / w.wall_s;
  }
  last_ = now;
  return w;
}

ThreadGovernor::ThreadGovernor(int max_threads, bool adapt)
    : max_threads_(std::max(1, max_threads)), threads_(max_threads_), wanted_(max_threads_) {
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
  CpuUsage usage;
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stop_cv_.wait_for(lock, kWindow, [this] { return stop_; })) {
    CpuUsage::Window w = usage.next();
    other_cores_ = w.other_cores();
    cores_ = w.cores;
    wanted_ = threads_for_free_cores(w.cores, w.other_cores(), max_threads_);
  }
}

void ThreadGovernor::apply() {
  const int want = wanted_.load();
  if (want == threads_) return;
  log::info("Other processes kept {:.1f} of this rank's {:.0f} cores busy over the last second: "
            "{} OpenMP thread(s) from now on (was {}, at most {})",
            other_cores_.load(), cores_.load(), want, threads_, max_threads_);
  threads_ = want;
  torch::set_num_threads(threads_);
}

}  // namespace titan::platform
