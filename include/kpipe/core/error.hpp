#pragma once
// The one exception type of kpipe. Its message is shown to the user as a
// single line ("kpipe: error: <message>"), so it must say what is wrong and
// how to fix it. The kind decides the exit code (DESIGN.md §7).

#include <stdexcept>
#include <string>

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

 private:
  ErrorKind kind_;
};

// Builders so call sites read `throw input_error(...)`.
Error input_error(const std::string& message);
Error runtime_error(const std::string& message);

}  // namespace kpipe
