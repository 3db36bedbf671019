#include "kpipe/comm/collectives.hpp"

#include <cstdint>
#include <limits>
#include <memory>
#include <numeric>
#include <stdexcept>
#include <string>

#include "kpipe/comm/detail/mpi_types.hpp"
#include "kpipe/comm/watchdog.hpp"

namespace kpipe::comm {

namespace {

std::unique_ptr<const Watchdog>& collective_watchdog() {
  static std::unique_ptr<const Watchdog> watchdog;
  return watchdog;
}

std::vector<std::int64_t> all_gather_int64(Communicator comm, std::int64_t mine,
                                           const char* what = "a gather of counts") {
  std::vector<std::int64_t> all(static_cast<std::size_t>(size_of(comm)));
  MPI_Request request;
  MPI_Iallgather(&mine, 1, MPI_INT64_T, all.data(), 1, MPI_INT64_T, comm, &request);
  complete_collective(request, what);
  return all;
}

}  // namespace

void watch_collectives(double seconds, int world_rank) {
  collective_watchdog() = std::make_unique<const Watchdog>(seconds, world_rank);
}

void complete_collective(MPI_Request& request, const char* what) {
  if (const Watchdog* watchdog = collective_watchdog().get()) {
    watchdog->wait(request, [&] { return std::string("in ") + what + " over all ranks of its group"; });
  } else {
    MPI_Wait(&request, MPI_STATUS_IGNORE);
  }
}

void watched(const char* what, const std::function<void()>& call) {
  if (const Watchdog* watchdog = collective_watchdog().get()) {
    const Deadline deadline(*watchdog, watchdog->seconds(), std::string("in ") + what + " over all ranks of its group");
    call();
  } else {
    call();
  }
}

Communicator world() { return MPI_COMM_WORLD; }

Communicator self() { return MPI_COMM_SELF; }

int rank_of(Communicator comm) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  return rank;
}

int size_of(Communicator comm) {
  int size = 0;
  MPI_Comm_size(comm, &size);
  return size;
}

SubCommunicator::SubCommunicator(Communicator comm, int color, int key) : comm_(MPI_COMM_NULL) {
  watched("a communicator split", [&] { MPI_Comm_split(comm, color < 0 ? MPI_UNDEFINED : color, key, &comm_); });
}

SubCommunicator::~SubCommunicator() {
  if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

bool SubCommunicator::empty() const { return comm_ == MPI_COMM_NULL; }

void barrier(Communicator comm, const char* what) {
  MPI_Request request;
  MPI_Ibarrier(comm, &request);
  complete_collective(request, what);
}

double wall_time() { return MPI_Wtime(); }

double sum(Communicator comm, double value) {
  double total = 0.0;
  MPI_Request request;
  MPI_Iallreduce(&value, &total, 1, MPI_DOUBLE, MPI_SUM, comm, &request);
  complete_collective(request, "a sum");
  return total;
}

double max(Communicator comm, double value) {
  double largest = 0.0;
  MPI_Request request;
  MPI_Iallreduce(&value, &largest, 1, MPI_DOUBLE, MPI_MAX, comm, &request);
  complete_collective(request, "a maximum");
  return largest;
}

std::vector<std::int64_t> sum(Communicator comm, const std::vector<std::int64_t>& values) {
  std::vector<std::int64_t> totals(values.size());
  MPI_Request request;
  MPI_Iallreduce(values.data(), totals.data(), static_cast<int>(values.size()), MPI_INT64_T, MPI_SUM, comm, &request);
  complete_collective(request, "a sum");
  return totals;
}

namespace {

template <class T>
std::vector<T> gather_equal(Communicator comm, const std::vector<T>& mine, MPI_Datatype type) {
  const int count = static_cast<int>(mine.size());
  std::vector<T> all(static_cast<std::size_t>(count) * size_of(comm));
  MPI_Request request;
  MPI_Iallgather(mine.data(), count, type, all.data(), count, type, comm, &request);
  complete_collective(request, "a gather");
  return all;
}

}  // namespace

std::vector<std::string> host_names(Communicator comm) {
  std::vector<char> mine(MPI_MAX_PROCESSOR_NAME + 1, '\0');
  int length = 0;
  MPI_Get_processor_name(mine.data(), &length);
  const std::vector<char> all = gather_equal(comm, mine, MPI_CHAR);
  std::vector<std::string> names;
  for (auto name = all.begin(); name != all.end(); name += static_cast<std::ptrdiff_t>(mine.size())) {
    names.emplace_back(&*name);
  }
  return names;
}

std::string broadcast(Communicator comm, int root, const std::string& text, const char* what) {
  std::vector<std::int64_t> length{static_cast<std::int64_t>(text.size())};
  MPI_Request request;
  MPI_Ibcast(length.data(), 1, MPI_INT64_T, root, comm, &request);
  complete_collective(request, what);
  if (length[0] > std::numeric_limits<int>::max()) {
    throw std::length_error("a broadcast of " + std::to_string(length[0]) + " bytes: more than MPI's int counts");
  }
  std::string received = rank_of(comm) == root ? text : std::string(static_cast<std::size_t>(length[0]), '\0');
  MPI_Ibcast(received.data(), static_cast<int>(length[0]), MPI_CHAR, root, comm, &request);
  complete_collective(request, what);
  return received;
}

std::vector<std::string> all_gather(Communicator comm, const std::string& mine, const char* what) {
  const std::vector<std::int64_t> lengths = all_gather_int64(comm, static_cast<std::int64_t>(mine.size()), what);
  const std::int64_t total = std::accumulate(lengths.begin(), lengths.end(), std::int64_t{0});
  if (total > std::numeric_limits<int>::max()) {
    throw std::length_error("a gather of " + std::to_string(total) + " bytes of text: more than MPI's int counts");
  }
  std::vector<int> counts(lengths.begin(), lengths.end()), offsets(lengths.size(), 0);
  std::partial_sum(counts.begin(), counts.end() - 1, offsets.begin() + 1);
  std::string all(static_cast<std::size_t>(total), '\0');
  MPI_Request request;
  MPI_Iallgatherv(mine.data(), static_cast<int>(mine.size()), MPI_CHAR, all.data(), counts.data(), offsets.data(),
                  MPI_CHAR, comm, &request);
  complete_collective(request, what);
  std::vector<std::string> texts;
  for (std::size_t r = 0; r < counts.size(); ++r) texts.push_back(all.substr(offsets[r], counts[r]));
  return texts;
}

std::vector<int> all_gather(Communicator comm, const std::vector<int>& mine) {
  return gather_equal(comm, mine, MPI_INT);
}

template <class T>
void broadcast(Communicator comm, int root, std::vector<T>& values) {
  MPI_Request request;
  MPI_Ibcast(values.data(), static_cast<int>(values.size()), mpi_type<T>(), root, comm, &request);
  complete_collective(request, "a broadcast");
}
template void broadcast<float>(Communicator, int, std::vector<float>&);
template void broadcast<double>(Communicator, int, std::vector<double>&);
template void broadcast<int>(Communicator, int, std::vector<int>&);

void broadcast(Communicator comm, int root, std::vector<int>& values, const Watchdog& watchdog, double idle_seconds) {
  MPI_Request request;
  MPI_Ibcast(values.data(), static_cast<int>(values.size()), MPI_INT, root, comm, &request);
  watchdog.wait(
      request, [] { return std::string("in a broadcast over all ranks of its group"); }, idle_seconds);
}

std::vector<double> all_gather(Communicator comm, const std::vector<double>& mine) {
  return gather_equal(comm, mine, MPI_DOUBLE);
}

void all_gather(Communicator comm, const unsigned char* mine, std::size_t bytes, unsigned char* all) {
  const int count = static_cast<int>(bytes);
  MPI_Request request;
  MPI_Iallgather(mine, count, MPI_BYTE, all, count, MPI_BYTE, comm, &request);
  complete_collective(request, "a gather");
}

template <class T>
void all_gather_rows(Communicator comm, T* data, std::int64_t columns, const std::vector<int>& first) {
  MPI_Datatype row;
  MPI_Type_contiguous(static_cast<int>(columns), mpi_type<T>(), &row);
  MPI_Type_commit(&row);
  std::vector<int> counts(first.size() - 1);
  for (std::size_t r = 0; r < counts.size(); ++r) counts[r] = first[r + 1] - first[r];
  MPI_Request request;
  MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, data, counts.data(), first.data(), row, comm, &request);
  complete_collective(request, "a gather of rows");
  MPI_Type_free(&row);
}
template void all_gather_rows<float>(Communicator, float*, std::int64_t, const std::vector<int>&);
template void all_gather_rows<double>(Communicator, double*, std::int64_t, const std::vector<int>&);

std::vector<double> all_gather_varying(Communicator comm, const std::vector<double>& mine,
                                       const std::vector<int>& counts) {
  std::vector<int> offsets(counts.size(), 0);
  std::partial_sum(counts.begin(), counts.end() - 1, offsets.begin() + 1);
  std::vector<double> all(static_cast<std::size_t>(offsets.back() + counts.back()));
  MPI_Request request;
  MPI_Iallgatherv(mine.data(), static_cast<int>(mine.size()), MPI_DOUBLE, all.data(), counts.data(), offsets.data(),
                  MPI_DOUBLE, comm, &request);
  complete_collective(request, "a gather");
  return all;
}

std::vector<double> all_gather_varying(Communicator comm, const std::vector<double>& mine, std::vector<int>* counts) {
  const std::vector<int> sizes = all_gather(comm, std::vector<int>{static_cast<int>(mine.size())});
  if (counts) *counts = sizes;
  return all_gather_varying(comm, mine, sizes);
}

std::vector<double> gather_to_root(Communicator comm, const std::vector<double>& mine) {
  const int count = static_cast<int>(mine.size());
  std::vector<double> all(rank_of(comm) == 0 ? static_cast<std::size_t>(count) * size_of(comm) : 0);
  MPI_Request request;
  MPI_Igather(mine.data(), count, MPI_DOUBLE, all.data(), count, MPI_DOUBLE, 0, comm, &request);
  complete_collective(request, "a gather to rank 0");
  return all;
}

std::vector<double> gather_varying_to_root(Communicator comm, const std::vector<double>& mine,
                                           std::vector<int>* counts) {
  // Every rank learns every count, so that all of them refuse a gather too
  // large for MPI's int counts alike instead of leaving the others waiting.
  const std::int64_t count = static_cast<std::int64_t>(mine.size());
  const std::vector<std::int64_t> sizes64 = all_gather_int64(comm, count);
  std::int64_t total = 0;
  for (const std::int64_t n : sizes64) total += n;
  if (total > std::numeric_limits<int>::max()) {
    throw std::length_error("gather_varying_to_root: more than INT_MAX values in all");
  }
  std::vector<int> sizes(sizes64.begin(), sizes64.end());
  std::vector<int> offsets(sizes.size(), 0);
  std::partial_sum(sizes.begin(), sizes.end() - 1, offsets.begin() + 1);
  const bool root = rank_of(comm) == 0;
  std::vector<double> all(root ? static_cast<std::size_t>(total) : 0);
  MPI_Request request;
  MPI_Igatherv(mine.data(), static_cast<int>(count), MPI_DOUBLE, all.data(), sizes.data(), offsets.data(), MPI_DOUBLE,
               0, comm, &request);
  complete_collective(request, "a gather to rank 0");
  if (counts && root) *counts = sizes;
  return all;
}

}  // namespace kpipe::comm
