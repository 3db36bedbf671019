#pragma once
// Rank-aware console output. The application sets the rank once; info() then
// prints on rank 0 only, so a message appears once however many ranks run.

#include <fmt/format.h>

#include <string_view>

namespace kpipe::log {

void set_rank(int rank);
int rank();
bool is_root();

namespace detail {
void write_info(std::string_view line);
void write_warning(std::string_view line);
}  // namespace detail

// A line for the user on stdout, rank 0 only.
template <class... Args>
void info(fmt::format_string<Args...> format, Args&&... args) {
  if (is_root()) detail::write_info(fmt::format(format, std::forward<Args>(args)...));
}
// A line on stderr prefixed "kpipe: warning:", rank 0 only.
template <class... Args>
void warning(fmt::format_string<Args...> format, Args&&... args) {
  if (is_root()) detail::write_warning(fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace kpipe::log
