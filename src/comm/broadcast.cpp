#include "kpipe/comm/broadcast.hpp"

#include "kpipe/core/error.hpp"

namespace kpipe::comm {

std::string broadcast_from_root(MPI_Comm comm, const std::function<std::string()>& read) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  std::string payload;
  int failed = 0;
  if (rank == 0) {
    try {
      payload = read();
    } catch (const Error& e) {
      payload = e.what();
      failed = 1;
    }
  }
  // One broadcast of {failed, length}, then the text or the error message.
  long long header[2] = {failed, static_cast<long long>(payload.size())};
  MPI_Bcast(header, 2, MPI_LONG_LONG, 0, comm);
  payload.resize(static_cast<std::size_t>(header[1]));
  MPI_Bcast(payload.data(), static_cast<int>(header[1]), MPI_CHAR, 0, comm);
  if (header[0] != 0) throw input_error(payload);
  return payload;
}

}  // namespace kpipe::comm
