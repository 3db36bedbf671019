#include <mpi.h>

#include <Kokkos_Core.hpp>

#include "catch.hpp"
#include "kpipe/comm/transport.hpp"

using namespace kpipe::comm;
using Matrix = kpipe::tensor::Matrix<double>;
using kpipe::tensor::BFloat16;
using kpipe::tensor::DType;
using kpipe::tensor::Half;

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

// MPI_Comm_rank or MPI_Comm_size of the world.
int world(int (*query)(MPI_Comm, int*)) {
  int value = 0;
  query(MPI_COMM_WORLD, &value);
  return value;
}

// This rank's place on the ring of the world's ranks, and a watchdog for its waits.
struct Ring {
  const int rank = world(MPI_Comm_rank);
  const int size = world(MPI_Comm_size);
  const int next = (rank + 1) % size;
  const int previous = (rank + size - 1) % size;
  const Watchdog watchdog{60.0, rank};
};

}  // namespace

TEST_CASE("messages around a ring arrive intact, posted early or late, staged or direct", "[comm]") {
  const Ring ring;
  const int messages = 6, rows = 5, cols = 7;

  for (const Staging staging : {Staging::automatic, Staging::host}) {
    Transport transport(MPI_COMM_WORLD, ring.watchdog, staging);
    // Automatic staging copies through the host exactly where MPI cannot read the Views' memory.
    CHECK(transport.staged() == (staging == Staging::host || !kpipe::comm::mpi_reaches_device_memory()));
    // Post half of the receives ahead of the sends, like the executor's look-ahead.
    for (int tag = 0; tag < messages / 2; ++tag)
      transport.post_receive({ring.previous, tag, rows, cols, DType::float64});
    for (int tag = 0; tag < messages; ++tag)
      transport.send({ring.next, tag, rows, cols, DType::float64}, make_message(ring.rank, tag, rows, cols));
    // Receive in reverse tag order: matching is by tag, not by arrival.
    for (int tag = messages - 1; tag >= 0; --tag) {
      const Matrix received = transport.complete_receive<double>({ring.previous, tag, rows, cols, DType::float64},
                                                                 [] { return std::string("test receive"); });
      CHECK(mismatches(received, ring.previous, tag) == 0);
    }
    transport.complete_sends("test sends");
    CHECK(transport.bytes_sent() == std::uint64_t(messages) * rows * cols * sizeof(double));
    CHECK(transport.messages_sent() == std::uint64_t(messages));
    CHECK(transport.peak_posted_receives() == messages / 2 + 1);
  }
}

TEST_CASE("receive buffers are reused once released", "[comm]") {
  const Ring ring;
  Transport transport(MPI_COMM_WORLD, ring.watchdog);
  const double* first_buffer = nullptr;
  for (int tag = 0; tag < 4; ++tag) {
    transport.send({ring.next, tag, 3, 3, DType::float64}, make_message(ring.rank, tag, 3, 3));
    const Matrix received = transport.complete_receive<double>({ring.previous, tag, 3, 3, DType::float64},
                                                               [] { return std::string("test receive"); });
    CHECK(mismatches(received, ring.previous, tag) == 0);
    if (tag == 0) first_buffer = received.data();
    // Each message is dropped before the next is posted, so one buffer serves all.
    CHECK(received.data() == first_buffer);
    transport.complete_sends("test sends");
  }
}

// compute.precision = bf16 and fp16 send boundaries as 16-bit elements: every
// bit pattern arrives unchanged (NaN payloads and float16 subnormals included),
// in half the bytes, staged or direct.
TEMPLATE_TEST_CASE("16-bit messages arrive bit for bit in half the bytes", "[comm][bf16][fp16]", BFloat16, Half) {
  const Ring ring;
  const DType dtype = kpipe::tensor::dtype_of<TestType>();
  constexpr int rows = 64, cols = 1024;  // all 65,536 bit patterns, shifted by the sender's rank
  const auto bits = [](int sender, int i, int j) { return static_cast<std::uint16_t>(i * cols + j + sender); };
  for (const Staging staging : {Staging::automatic, Staging::host}) {
    Transport transport(MPI_COMM_WORLD, ring.watchdog, staging);
    kpipe::tensor::Matrix<TestType> message("message", rows, cols);
    auto host = Kokkos::create_mirror_view(message);
    for (int i = 0; i < rows; ++i)
      for (int j = 0; j < cols; ++j) host(i, j).bits = bits(ring.rank, i, j);
    Kokkos::deep_copy(message, host);
    transport.send({ring.next, 7, rows, cols, dtype}, message);
    const auto received = transport.complete_receive<TestType>({ring.previous, 7, rows, cols, dtype},
                                                               [] { return std::string("16-bit"); });
    transport.complete_sends("16-bit sends");
    const auto got = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), received);
    int wrong = 0;
    for (int i = 0; i < rows; ++i)
      for (int j = 0; j < cols; ++j) wrong += got(i, j).bits != bits(ring.previous, i, j);
    CHECK(wrong == 0);
    CHECK(transport.bytes_sent() == std::uint64_t(rows) * cols * 2);
  }
}

TEST_CASE("a message asked for in another element type than it travels in is an error", "[comm]") {
  const Ring ring;
  Transport transport(MPI_COMM_WORLD, ring.watchdog);
  CHECK_THROWS_WITH(transport.send({ring.next, 1, 3, 3, DType::bfloat16}, make_message(ring.rank, 1, 3, 3)),
                    Catch::Contains("is bfloat16, but a float64 matrix was given"));
}
