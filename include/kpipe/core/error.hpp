#pragma once
// The one exception type of kpipe. Its message is shown to the user as a
// single line ("kpipe: error: <message>"), so it must say what is wrong and
// how to fix it. The kind decides the exit code (DESIGN.md §7).

#include <stdexcept>
#include <string>
#include <utility>

namespace kpipe {

enum class ErrorKind {
  input,    // bad deck, command line, data file or checkpoint: exit code 2
  runtime,  // the run itself failed: exit code 1
};

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message);

  ErrorKind kind() const noexcept { return kind_; }
  int exit_code() const noexcept { return kind_ == ErrorKind::input ? 2 : 1; }

  // Lines printed on standard output before the one error line, where a
  // picture locates the problem better than words (an invalid schedule's
  // grid of actions); the error line stays complete without them.
  Error& with_context(std::string text) {
    context_ = std::move(text);
    return *this;
  }
  const std::string& context() const noexcept { return context_; }

 private:
  ErrorKind kind_;
  std::string context_;
};

// Builders so call sites read `throw input_error(...)`.
Error input_error(const std::string& message);
Error runtime_error(const std::string& message);

// What a failure that is not a kpipe::Error means to the user, as an Error:
// an allocation that failed (std::bad_alloc, Kokkos' allocation failures)
// is the deck asking for more memory than the rank has, an input error that
// says which keys lower it; anything else is an internal error. `during`
// names the phase ("set-up", "step 12").
Error error_of_failure(const std::exception& failure, const std::string& during);

}  // namespace kpipe
