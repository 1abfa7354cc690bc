// Test helpers for processes: run a shell command and capture its output and exit code, or start
// one in the background, find its children and wait for it with a timeout.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace titan::testing {

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr, interleaved
};

/// Runs `command` with /bin/sh and waits for it.
inline CommandResult run_command(const std::string& command) {
  CommandResult r;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (!pipe) return r;
  std::array<char, 4096> buf{};
  while (fgets(buf.data(), buf.size(), pipe)) r.output += buf.data();
  int status = pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

/// Starts `command` with /bin/sh in the background, its output going to `log`; the returned pid
/// is the command's own (the shell execs it).
inline pid_t spawn_command(const std::string& command, const std::filesystem::path& log) {
  const std::string line = "exec " + command + " > '" + log.string() + "' 2>&1";
  const pid_t pid = fork();
  if (pid == 0) {
    execl("/bin/sh", "sh", "-c", line.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  return pid;
}

/// The state letter of /proc/<pid>/stat ('R', 'S', 'Z', ...), or 0 when the process is gone.
inline char process_state(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  std::getline(in, stat);
  const auto close = stat.rfind(')');
  return close == std::string::npos || close + 2 >= stat.size() ? 0 : stat[close + 2];
}

/// Alive: exists and is not a zombie waiting to be reaped.
inline bool process_alive(pid_t pid) {
  const char state = process_state(pid);
  return state != 0 && state != 'Z';
}

/// Processes whose parent is `pid`, found through /proc.
inline std::vector<pid_t> child_processes(pid_t pid) {
  std::vector<pid_t> children;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(entry.path() / "stat");
    std::string stat;
    std::getline(in, stat);
    const auto close = stat.rfind(')');
    if (close == std::string::npos) continue;
    char state = 0;
    int parent = 0;
    std::istringstream(stat.substr(close + 1)) >> state >> parent;
    if (parent == pid) children.push_back(std::stoi(name));
  }
  return children;
}

/// Waits up to `timeout` for the child `pid` to exit: its exit code (128 + signal when killed
/// by one), or -1 after killing it when it did not exit in time.
inline int wait_for_exit(pid_t pid, std::chrono::seconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) != pid) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/// The folders make_temp_dir made, removed when the test process that made them exits (a run's
/// dump folder holds checkpoints: a suite left tens of GB behind). TITAN_KEEP_TEST_DIRS=1 keeps
/// them for a look after a failure.
class TempDirs {
 public:
  ~TempDirs() {
    if (std::getenv("TITAN_KEEP_TEST_DIRS") != nullptr || ::getpid() != owner_) return;
    std::error_code ec;
    for (const auto& dir : dirs_) std::filesystem::remove_all(dir, ec);
  }
  void add(const std::filesystem::path& dir) {
    std::lock_guard<std::mutex> lock(mutex_);
    dirs_.push_back(dir);
  }

 private:
  const pid_t owner_ = ::getpid();  // a forked child leaves them alone
  std::mutex mutex_;
  std::vector<std::filesystem::path> dirs_;
};

/// A fresh empty folder under the system temp folder, removed when the test process exits.
inline std::filesystem::path make_temp_dir(const std::string& prefix) {
  static TempDirs made;
  std::random_device rd;
  auto dir = std::filesystem::temp_directory_path() /
             (prefix + "_" + std::to_string(rd()) + std::to_string(rd()));
  std::filesystem::create_directories(dir);
  made.add(dir);
  return dir;
}

/// A TCP port on the loopback interface that was free a moment ago.
inline int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

/// Path of the titan binary under test.
inline std::string titan_binary() { return TITAN_BINARY; }

}  // namespace titan::testing
