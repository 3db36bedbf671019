#pragma once
// Messages whose order, sender and size are decided at run time: pipelined
// serving forms each microbatch from the requests that are ready, so no rank
// can post its receives from a schedule the way Transport does. A message is
// a small integer header (what the receiver needs to interpret it) and a
// vector of values; one receive is always posted, for any sender, into a
// buffer of the largest message the caller declared, and sends complete
// lazily. MPI keeps messages between one pair of ranks in order, which the
// serving executor relies on.

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <list>
#include <optional>
#include <string>
#include <vector>

#include "kpipe/comm/watchdog.hpp"

namespace kpipe::comm {

template <class Scalar>
struct Packet {
  int source = 0;
  std::vector<std::int32_t> header;
  std::vector<Scalar> values;
};

template <class Scalar>
class Mailbox {
 public:
  // Messages of at most `max_header` header entries and `max_values` values;
  // their bytes (capacity) must fit an MPI count, an int.
  Mailbox(MPI_Comm comm, const Watchdog& watchdog, std::size_t max_header, std::size_t max_values);
  // The bytes of the largest such message.
  static std::size_t capacity(std::size_t max_header, std::size_t max_values);
  ~Mailbox();
  Mailbox(const Mailbox&) = delete;
  Mailbox& operator=(const Mailbox&) = delete;

  // Starts sending to `destination`; the data is copied, so the caller may
  // reuse its vectors at once. A message larger than declared is a logic error.
  void send(int destination, const std::vector<std::int32_t>& header, const std::vector<Scalar>& values);
  // The next message if one has arrived, without waiting.
  std::optional<Packet<Scalar>> poll();
  // The next message, waiting for it under the watchdog (which starts to
  // count after `idle_seconds`, Watchdog::wait); `what` names the wait.
  Packet<Scalar> receive(const std::string& what, double idle_seconds = 0.0);
  // Waits for every send started so far.
  void complete_sends(const std::string& what);

 private:
  void post();
  Packet<Scalar> unpack() const;
  void reap_sends();

  MPI_Comm comm_;
  const Watchdog& watchdog_;
  std::size_t capacity_;  // bytes of the largest message
  std::vector<std::byte> inbox_;
  MPI_Request posted_ = MPI_REQUEST_NULL;
  struct Outgoing {
    std::vector<std::byte> bytes;
    MPI_Request request = MPI_REQUEST_NULL;
  };
  std::list<Outgoing> sends_;  // stable addresses while MPI reads them
};

}  // namespace kpipe::comm
