#include "kpipe/core/isolated.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <exception>

#include "kpipe/core/error.hpp"

// The sanitizers' public interface (sanitizer/common_interface_defs.h),
// weak: present only in instrumented builds.
extern "C" void __sanitizer_set_death_callback(void (*callback)(void)) __attribute__((weak));

namespace kpipe {

namespace {

// The child's report: one code byte, then the message.
constexpr char finished = 'F', refused = 'R', failed = 'X';

void write_all(int fd, const std::string& bytes) {
  for (std::size_t done = 0; done < bytes.size();) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += static_cast<std::size_t>(n);
  }
}

[[noreturn]] void run_child(const std::function<void()>& work, int report) {
  // A fuzzer's death callback (saving the parent's input as a crash) is not the child's to run.
  if (__sanitizer_set_death_callback) __sanitizer_set_death_callback(nullptr);
  const int null = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  if (null >= 0) {
    ::dup2(null, STDOUT_FILENO);
    ::dup2(null, STDERR_FILENO);
  }
  std::string outcome(1, finished);
  try {
    work();
  } catch (const Error& error) {
    outcome = (error.kind() == ErrorKind::input ? refused : failed) + std::string(error.what());
  } catch (const std::exception& other) {
    outcome = failed + std::string(other.what());
  } catch (...) {
    outcome = failed + std::string("an exception of unknown type");
  }
  write_all(report, outcome);
  ::_exit(0);
}

// Appends to `report` what the child writes until it closes the pipe; false
// when `seconds` pass first.
bool read_report(int fd, double seconds, std::string& report) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  char buffer[4096];
  for (;;) {
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) return false;
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - now);
    pollfd wait{fd, POLLIN, 0};
    const int ready = ::poll(&wait, 1, static_cast<int>(std::min<long long>(left.count(), 1000)));
    if (ready < 0 && errno != EINTR) return true;
    if (ready <= 0) continue;
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return true;
    report.append(buffer, static_cast<std::size_t>(n));
  }
}

int wait_for(pid_t child) {
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

}  // namespace

IsolatedOutcome run_isolated(const std::function<void()>& work, double seconds) {
  int pipe_ends[2];
  if (::pipe2(pipe_ends, O_CLOEXEC) != 0) return {IsolatedOutcome::End::not_run, std::strerror(errno)};
  const pid_t child = ::fork();
  if (child < 0) {
    const int error = errno;
    ::close(pipe_ends[0]);
    ::close(pipe_ends[1]);
    return {IsolatedOutcome::End::not_run, std::strerror(error)};
  }
  if (child == 0) {
    ::close(pipe_ends[0]);
    run_child(work, pipe_ends[1]);
  }
  ::close(pipe_ends[1]);
  std::string report;
  const bool ended = read_report(pipe_ends[0], seconds, report);
  ::close(pipe_ends[0]);
  if (!ended) {
    ::kill(child, SIGKILL);
    wait_for(child);
    return {IsolatedOutcome::End::timed_out, {}};
  }
  const int status = wait_for(child);
  if (WIFSIGNALED(status)) {
    const int signal = WTERMSIG(status);
    return {IsolatedOutcome::End::crashed, "signal " + std::to_string(signal) + " (" + ::strsignal(signal) + ")"};
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || report.empty()) {
    return {IsolatedOutcome::End::crashed, "exit status " + std::to_string(WEXITSTATUS(status))};
  }
  const std::string message = report.substr(1);
  switch (report[0]) {
    case finished:
      return {IsolatedOutcome::End::finished, {}};
    case refused:
      return {IsolatedOutcome::End::refused, message};
    default:
      return {IsolatedOutcome::End::failed, message};
  }
}

KeptFromChildren::KeptFromChildren(const std::vector<std::pair<void*, std::size_t>>& ranges) {
  const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  for (const auto& [address, bytes] : ranges) {
    const auto begin = reinterpret_cast<std::uintptr_t>(address);
    const std::uintptr_t first = (begin + page - 1) / page * page, end = (begin + bytes) / page * page;
    // Best effort: a range madvise refuses is inherited as before.
    if (end > first && ::madvise(reinterpret_cast<void*>(first), end - first, MADV_DONTFORK) == 0) {
      pages_.emplace_back(reinterpret_cast<void*>(first), end - first);
    }
  }
}

KeptFromChildren::~KeptFromChildren() {
  for (const auto& [address, bytes] : pages_) ::madvise(address, bytes, MADV_DOFORK);
}

}  // namespace kpipe
