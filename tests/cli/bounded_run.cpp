// bounded_run MAX_MIB MAX_SECONDS COMMAND [ARGS...]
//
// Runs COMMAND and exits with its exit code when it finished within
// MAX_SECONDS with a peak resident set of at most MAX_MIB (wait4's
// ru_maxrss: the child's own peak, not a sampled guess); otherwise exits with
// 125 and says which limit was broken. For the hostile-input tests, as the
// launcher of expect_error.cmake: a rejected input must cost neither memory
// nor time. The measurement goes to stdout, which those tests do not check.
#include <signal.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

int main(int argc, char** argv) {
  constexpr int broken = 125;
  if (argc < 4) {
    std::fprintf(stderr, "usage: bounded_run MAX_MIB MAX_SECONDS COMMAND [ARGS...]\n");
    return broken;
  }
  const long max_kib = std::atol(argv[1]) * 1024;
  const double max_seconds = std::atof(argv[2]);
  const auto start = std::chrono::steady_clock::now();
  const pid_t child = fork();
  if (child == 0) {
    execvp(argv[3], argv + 3);
    std::perror("bounded_run: exec");
    _exit(127);
  }
  int status = 0;
  rusage usage{};
  // Poll so that a runaway child is killed at the limit instead of at ctest's timeout.
  while (true) {
    const pid_t done = wait4(child, &status, WNOHANG, &usage);
    if (done == child) break;
    const std::chrono::duration<double> waited = std::chrono::steady_clock::now() - start;
    if (waited.count() > max_seconds) {
      kill(child, SIGKILL);
      wait4(child, &status, 0, &usage);
      std::fprintf(stderr, "bounded_run: killed after %.1f s (limit %.1f s)\n", waited.count(), max_seconds);
      return broken;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
  std::printf("bounded_run: %.2f s, peak resident %ld MiB (limits %.0f s, %ld MiB)\n", took.count(),
              usage.ru_maxrss / 1024, max_seconds, max_kib / 1024);
  std::fflush(stdout);
  if (!WIFEXITED(status)) {
    std::fprintf(stderr, "bounded_run: killed by signal %d\n", WTERMSIG(status));
    return broken;
  }
  if (usage.ru_maxrss > max_kib) {
    std::fprintf(stderr, "bounded_run: peak resident %ld MiB exceeds %ld MiB\n", usage.ru_maxrss / 1024,
                 max_kib / 1024);
    return broken;
  }
  return WEXITSTATUS(status);
}
