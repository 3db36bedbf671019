#include "kpipe/core/log.hpp"

#include <cstdio>

namespace kpipe::log {

namespace {
int current_rank = 0;
}

void set_rank(int rank) { current_rank = rank; }
int rank() { return current_rank; }
bool is_root() { return current_rank == 0; }

namespace detail {

void write_info(std::string_view message) {
  std::fwrite(message.data(), 1, message.size(), stdout);
  std::fputc('\n', stdout);
  std::fflush(stdout);
}

void write_warning(std::string_view message) {
  std::fprintf(stderr, "kpipe: warning: %.*s\n", static_cast<int>(message.size()), message.data());
}

}  // namespace detail
}  // namespace kpipe::log
