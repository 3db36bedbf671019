#include "kpipe/comm/mailbox.hpp"

#include <fmt/format.h>

#include <cstring>
#include <limits>
#include <stdexcept>

#include "kpipe/comm/collectives.hpp"
#include "kpipe/core/error.hpp"

namespace kpipe::comm {

namespace {

constexpr int mailbox_tag = 0x6d62;  // "mb": apart from the schedule's tags

// Wire layout: source, header count, value count, the header, the values.
constexpr std::size_t preamble = 3 * sizeof(std::int32_t);

// memcpy for ranges that may be empty: an empty vector's data() may be null,
// which memcpy must never see, even for zero bytes.
void copy_bytes(void* to, const void* from, std::size_t bytes) {
  if (bytes > 0) std::memcpy(to, from, bytes);
}

}  // namespace

template <class Scalar>
Mailbox<Scalar>::Mailbox(MPI_Comm comm, const Watchdog& watchdog, std::size_t max_header, std::size_t max_values)
    : comm_(comm), watchdog_(watchdog), capacity_(capacity(max_header, max_values)) {
  if (capacity_ > static_cast<std::size_t>(std::numeric_limits<int>::max())) {
    throw runtime_error(fmt::format("a mailbox message of {} bytes does not fit an MPI count", capacity_));
  }
  inbox_.resize(capacity_);
  post();
}

template <class Scalar>
std::size_t Mailbox<Scalar>::capacity(std::size_t max_header, std::size_t max_values) {
  return preamble + max_header * sizeof(std::int32_t) + max_values * sizeof(Scalar);
}

template <class Scalar>
Mailbox<Scalar>::~Mailbox() {
  if (posted_ != MPI_REQUEST_NULL) {
    MPI_Cancel(&posted_);
    MPI_Request_free(&posted_);
  }
  for (Outgoing& outgoing : sends_) MPI_Wait(&outgoing.request, MPI_STATUS_IGNORE);
}

template <class Scalar>
void Mailbox<Scalar>::post() {
  MPI_Irecv(inbox_.data(), static_cast<int>(capacity_), MPI_BYTE, MPI_ANY_SOURCE, mailbox_tag, comm_, &posted_);
}

template <class Scalar>
void Mailbox<Scalar>::send(int destination, const std::vector<std::int32_t>& header,
                           const std::vector<Scalar>& values) {
  const std::size_t bytes = preamble + header.size() * sizeof(std::int32_t) + values.size() * sizeof(Scalar);
  if (bytes > capacity_) {
    throw std::logic_error("kpipe::comm::Mailbox: a message of " + std::to_string(bytes) +
                           " bytes exceeds the declared " + std::to_string(capacity_));
  }
  reap_sends();
  Outgoing& outgoing = sends_.emplace_back();
  outgoing.bytes.resize(bytes);
  const std::int32_t counts[3] = {rank_of(comm_), static_cast<std::int32_t>(header.size()),
                                  static_cast<std::int32_t>(values.size())};
  std::byte* at = outgoing.bytes.data();
  std::memcpy(at, counts, preamble);
  copy_bytes(at + preamble, header.data(), header.size() * sizeof(std::int32_t));
  copy_bytes(at + preamble + header.size() * sizeof(std::int32_t), values.data(), values.size() * sizeof(Scalar));
  MPI_Isend(at, static_cast<int>(bytes), MPI_BYTE, destination, mailbox_tag, comm_, &outgoing.request);
}

template <class Scalar>
Packet<Scalar> Mailbox<Scalar>::unpack() const {
  std::int32_t counts[3];
  std::memcpy(counts, inbox_.data(), preamble);
  Packet<Scalar> packet;
  packet.source = counts[0];
  packet.header.resize(static_cast<std::size_t>(counts[1]));
  packet.values.resize(static_cast<std::size_t>(counts[2]));
  const std::byte* at = inbox_.data() + preamble;
  copy_bytes(packet.header.data(), at, packet.header.size() * sizeof(std::int32_t));
  copy_bytes(packet.values.data(), at + packet.header.size() * sizeof(std::int32_t),
             packet.values.size() * sizeof(Scalar));
  return packet;
}

template <class Scalar>
std::optional<Packet<Scalar>> Mailbox<Scalar>::poll() {
  int arrived = 0;
  MPI_Test(&posted_, &arrived, MPI_STATUS_IGNORE);
  if (!arrived) return std::nullopt;
  Packet<Scalar> packet = unpack();
  post();
  return packet;
}

template <class Scalar>
Packet<Scalar> Mailbox<Scalar>::receive(const std::string& what, double idle_seconds) {
  watchdog_.wait(
      posted_, [&] { return "for " + what; }, idle_seconds);
  Packet<Scalar> packet = unpack();
  post();
  return packet;
}

template <class Scalar>
void Mailbox<Scalar>::reap_sends() {
  for (auto it = sends_.begin(); it != sends_.end();) {
    int done = 0;
    MPI_Test(&it->request, &done, MPI_STATUS_IGNORE);
    it = done ? sends_.erase(it) : std::next(it);
  }
}

template <class Scalar>
void Mailbox<Scalar>::complete_sends(const std::string& what) {
  for (Outgoing& outgoing : sends_) watchdog_.wait(outgoing.request, [&] { return "to complete " + what; });
  sends_.clear();
}

template class Mailbox<float>;
template class Mailbox<double>;

}  // namespace kpipe::comm
