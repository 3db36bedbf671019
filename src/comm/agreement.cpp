#include "kpipe/comm/agreement.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "kpipe/core/error.hpp"

namespace kpipe::comm {

namespace {

struct Outcome {
  int exit_code = 0;  // 0: the phase succeeded on this rank
  std::string message;
};

Outcome outcome_of(std::exception_ptr failure, const std::string& phase) {
  if (!failure) return {};
  try {
    std::rethrow_exception(failure);
  } catch (const Error& e) {
    return {e.exit_code(), e.what()};
  } catch (const std::exception& e) {
    const Error error = error_of_failure(e, phase);
    return {error.exit_code(), error.what()};
  } catch (...) {
    return {1, "internal error: an exception of unknown type"};
  }
}

}  // namespace

void agree(Communicator comm, const Watchdog& watchdog, const std::string& phase, std::exception_ptr failure) {
  const Outcome mine = outcome_of(failure, phase);
  std::vector<int> codes(static_cast<std::size_t>(size_of(comm)));
  MPI_Request request = MPI_REQUEST_NULL;
  MPI_Iallgather(&mine.exit_code, 1, MPI_INT, codes.data(), 1, MPI_INT, comm, &request);
  watchdog.wait(request, [&] { return fmt::format("at the end of {} for every rank to finish it", phase); });

  const auto first = std::find_if(codes.begin(), codes.end(), [](int code) { return code != 0; });
  if (first == codes.end()) return;
  const int failing_rank = static_cast<int>(first - codes.begin());
  // Every rank is here, so a blocking broadcast of the failing rank's message cannot hang.
  int length = rank_of(comm) == failing_rank ? static_cast<int>(mine.message.size()) : 0;
  MPI_Bcast(&length, 1, MPI_INT, failing_rank, comm);
  std::string message =
      rank_of(comm) == failing_rank ? mine.message : std::string(static_cast<std::size_t>(length), ' ');
  MPI_Bcast(message.data(), length, MPI_CHAR, failing_rank, comm);

  // A failure on every rank is the input's (a bad deck fails everywhere alike);
  // one on some ranks only is named by the rank it happened on.
  const bool everywhere = std::none_of(codes.begin(), codes.end(), [](int code) { return code == 0; });
  const ErrorKind kind = *first == 2 ? ErrorKind::input : ErrorKind::runtime;
  throw AgreedError(kind, everywhere ? message : fmt::format("rank {}: {}", failing_rank, message));
}

}  // namespace kpipe::comm
