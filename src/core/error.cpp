#include "kpipe/core/error.hpp"

#include <algorithm>

#include "kpipe/core/strings.hpp"

namespace kpipe {

namespace {
// Messages are printed as one line; a stray newline from a library would break
// that, and a control character quoted from the input would reach the terminal.
std::string single_line(std::string text) {
  std::replace(text.begin(), text.end(), '\n', ' ');
  std::replace(text.begin(), text.end(), '\r', ' ');
  return printable(text);
}
}  // namespace

Error::Error(ErrorKind kind, const std::string& message) : std::runtime_error(single_line(message)), kind_(kind) {}

Error input_error(const std::string& message) { return Error(ErrorKind::input, message); }
Error runtime_error(const std::string& message) { return Error(ErrorKind::runtime, message); }

}  // namespace kpipe
