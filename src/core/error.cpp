#include "kpipe/core/error.hpp"

#include <algorithm>
#include <new>

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

Error error_of_failure(const std::exception& failure, const std::string& during) {
  if (dynamic_cast<const std::bad_alloc*>(&failure) != nullptr) {
    return input_error(
        "out of memory during " + during +
        ": an allocation failed; lower what the deck asks for (train.microbatch_size, the model's widths, "
        "model.context, inference.kv_cache_mib) or run on more ranks; runtime.memory_limit_mib makes kpipe check the "
        "estimate before it allocates (" +
        std::string(failure.what()) + ")");
  }
  return runtime_error("internal error during " + during + ": " + failure.what());
}

}  // namespace kpipe
