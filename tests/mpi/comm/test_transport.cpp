#include <mpi.h>

#include <Kokkos_Core.hpp>

#include "catch.hpp"
#include "kpipe/comm/transport.hpp"

using namespace kpipe::comm;
using Matrix = Transport<double>::Matrix;

namespace {

// The value element (i, j) of the message with `tag` from `sender` holds.
double expected_value(int sender, int tag, int i, int j) { return sender * 1e6 + tag * 1e3 + i * 10 + j; }

Matrix make_message(int sender, int tag, int rows, int cols) {
  Matrix m("message", rows, cols);
  auto host = Kokkos::create_mirror_view(m);
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < cols; ++j) host(i, j) = expected_value(sender, tag, i, j);
  Kokkos::deep_copy(m, host);
  return m;
}

int mismatches(const Matrix& m, int sender, int tag) {
  auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), m);
  int wrong = 0;
  for (int i = 0; i < m.extent_int(0); ++i)
    for (int j = 0; j < m.extent_int(1); ++j) wrong += host(i, j) != expected_value(sender, tag, i, j);
  return wrong;
}

}  // namespace

TEST_CASE("messages around a ring arrive intact, posted early or late, staged or direct", "[comm]") {
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int next = (rank + 1) % size, previous = (rank + size - 1) % size;
  const Watchdog watchdog(60.0, rank);
  const int messages = 6, rows = 5, cols = 7;

  for (const Staging staging : {Staging::automatic, Staging::host}) {
    Transport<double> transport(MPI_COMM_WORLD, watchdog, staging);
    CHECK(transport.staged() == (staging == Staging::host));
    // Post half of the receives ahead of the sends, like the executor's look-ahead.
    for (int tag = 0; tag < messages / 2; ++tag) transport.post_receive({previous, tag, rows, cols});
    for (int tag = 0; tag < messages; ++tag)
      transport.send({next, tag, rows, cols}, make_message(rank, tag, rows, cols));
    // Receive in reverse tag order: matching is by tag, not by arrival.
    for (int tag = messages - 1; tag >= 0; --tag) {
      const Matrix received =
          transport.complete_receive({previous, tag, rows, cols}, [] { return std::string("test receive"); });
      CHECK(mismatches(received, previous, tag) == 0);
    }
    transport.complete_sends("test sends");
    CHECK(transport.bytes_sent() == std::uint64_t(messages) * rows * cols * sizeof(double));
    CHECK(transport.messages_sent() == std::uint64_t(messages));
    CHECK(transport.peak_posted_receives() == messages / 2 + 1);
  }
}

TEST_CASE("receive buffers are reused once released", "[comm]") {
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const Watchdog watchdog(60.0, rank);
  Transport<double> transport(MPI_COMM_WORLD, watchdog);
  const int next = (rank + 1) % size, previous = (rank + size - 1) % size;
  const double* first_buffer = nullptr;
  for (int tag = 0; tag < 4; ++tag) {
    transport.send({next, tag, 3, 3}, make_message(rank, tag, 3, 3));
    const Matrix received =
        transport.complete_receive({previous, tag, 3, 3}, [] { return std::string("test receive"); });
    CHECK(mismatches(received, previous, tag) == 0);
    if (tag == 0) first_buffer = received.data();
    // Each message is dropped before the next is posted, so one buffer serves all.
    CHECK(received.data() == first_buffer);
    transport.complete_sends("test sends");
  }
}
