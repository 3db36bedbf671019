#include "kpipe/comm/broadcast.hpp"

#include "kpipe/comm/collectives.hpp"
#include "kpipe/core/error.hpp"

namespace kpipe::comm {

std::string broadcast_from_root(MPI_Comm comm, const std::function<std::string()>& read) {
  // Rank 0 sends its text, or the error it met, behind one byte that says which.
  constexpr char text = 't', error = 'e';
  std::string payload;
  if (rank_of(comm) == 0) {
    try {
      payload = text + read();
    } catch (const Error& e) {
      payload = error + std::string(e.what());
    }
  }
  payload = broadcast(comm, 0, payload, "a broadcast of an input file");
  const bool failed = payload.front() == error;
  payload.erase(0, 1);
  if (failed) throw input_error(payload);
  return payload;
}

}  // namespace kpipe::comm
