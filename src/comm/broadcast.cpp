#include "kpipe/comm/broadcast.hpp"

#include "kpipe/comm/collectives.hpp"
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
  MPI_Request request;
  MPI_Ibcast(header, 2, MPI_LONG_LONG, 0, comm, &request);
  complete_collective(request, "a broadcast of an input file");
  payload.resize(static_cast<std::size_t>(header[1]));
  MPI_Ibcast(payload.data(), static_cast<int>(header[1]), MPI_CHAR, 0, comm, &request);
  complete_collective(request, "a broadcast of an input file");
  if (header[0] != 0) throw input_error(payload);
  return payload;
}

}  // namespace kpipe::comm
