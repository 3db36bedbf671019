#include "kpipe/comm/process_grid.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "kpipe/comm/collectives.hpp"
#include "kpipe/core/error.hpp"
#include "kpipe/core/fault.hpp"

namespace kpipe::comm {

ProcessGrid::ProcessGrid(MPI_Comm world, int stages, int tensor_parallel, int data_parallel)
    : world_(world), stages_(stages), replicas_(data_parallel), tensor_size_(tensor_parallel) {
  int size = 0;
  MPI_Comm_size(world, &size);
  MPI_Comm_rank(world, &world_rank_);
  const int wanted = stages * data_parallel * tensor_parallel;
  if (size != wanted) {
    const std::string product =
        tensor_parallel == 1
            ? fmt::format("pipeline.stages * pipeline.data_parallel = {} * {}", stages, data_parallel)
            : fmt::format("pipeline.stages * pipeline.tensor_parallel * pipeline.data_parallel = {} * {} * {}", stages,
                          tensor_parallel, data_parallel);
    throw input_error(fmt::format("the job has {} MPI rank{}, but {} = {}; launch with mpirun -n {} or change the deck",
                                  size, size == 1 ? "" : "s", product, wanted, wanted));
  }
  tensor_rank_ = world_rank_ % tensor_parallel;
  const int position = world_rank_ / tensor_parallel;  // replica · p + pipeline rank
  pipeline_rank_ = position % stages;
  replica_ = position / stages;
  fault::inject(fault::Phase::grid_stall, world_rank_);
  watched("splitting the world into the grid's groups", [&] {
    MPI_Comm_split(world, replica_ * tensor_parallel + tensor_rank_, pipeline_rank_, &pipeline_);
    MPI_Comm_split(world, pipeline_rank_ * tensor_parallel + tensor_rank_, replica_, &data_);
    MPI_Comm_split(world, position, tensor_rank_, &tensor_);
  });
  hosts_ = host_names(world);
}

int ProcessGrid::ranks_on_node() const {
  return static_cast<int>(std::count(hosts_.begin(), hosts_.end(), hosts_[static_cast<std::size_t>(world_rank_)]));
}

ProcessGrid::~ProcessGrid() {
  MPI_Comm_free(&pipeline_);
  MPI_Comm_free(&data_);
  MPI_Comm_free(&tensor_);
}

std::string grid_layout(int stages, int tensor_parallel, int data_parallel) {
  const int t = tensor_parallel;
  std::string text = fmt::format("process grid: world {} = {} pipeline{} x {} stage{}", stages * data_parallel * t,
                                 data_parallel, data_parallel == 1 ? "" : "s", stages, stages == 1 ? "" : "s");
  if (t > 1) text += fmt::format(" x {} tensor ranks", t);
  for (int replica = 0; replica < data_parallel; ++replica) {
    const int first = replica * stages * t;
    if (t == 1) {
      text += fmt::format("\n  pipeline {}: world ranks {}..{} hold stages 0..{}", replica, first, first + stages - 1,
                          stages - 1);
      continue;
    }
    text += fmt::format("\n  pipeline {}:", replica);
    for (int stage = 0; stage < stages; ++stage) {
      text += fmt::format(" stage {} on world ranks {}..{}{}", stage, first + stage * t, first + (stage + 1) * t - 1,
                          stage + 1 < stages ? "," : "");
    }
  }
  return text;
}

namespace {

// "0..3, 6": the ranks, consecutive ones as runs.
std::string ranks_text(const std::vector<int>& ranks) {
  std::vector<std::string> runs;
  for (std::size_t first = 0; first < ranks.size();) {
    std::size_t last = first;
    while (last + 1 < ranks.size() && ranks[last + 1] == ranks[last] + 1) ++last;
    runs.push_back(first == last ? std::to_string(ranks[first]) : fmt::format("{}..{}", ranks[first], ranks[last]));
    first = last + 1;
  }
  return fmt::format("{}", fmt::join(runs, ", "));
}

}  // namespace

std::string host_layout(const std::vector<std::string>& hosts) {
  std::vector<std::pair<std::string, std::vector<int>>> held;  // hosts in the order of their first rank
  for (std::size_t rank = 0; rank < hosts.size(); ++rank) {
    auto host = std::find_if(held.begin(), held.end(), [&](const auto& h) { return h.first == hosts[rank]; });
    if (host == held.end()) host = held.insert(held.end(), {hosts[rank], {}});
    host->second.push_back(static_cast<int>(rank));
  }
  if (held.size() < 2) return {};
  std::vector<std::string> parts;
  for (const auto& [host, ranks] : held) {
    parts.push_back(fmt::format("{} holds world rank{} {}", host, ranks.size() == 1 ? "" : "s", ranks_text(ranks)));
  }
  return fmt::format("hosts: {}", fmt::join(parts, "; "));
}

int first_split_tensor_group(const std::vector<std::string>& hosts, int tensor_parallel) {
  const std::size_t t = static_cast<std::size_t>(std::max(tensor_parallel, 1));
  for (std::size_t first = 0; first + t <= hosts.size(); first += t) {
    if (std::any_of(hosts.begin() + first, hosts.begin() + first + t,
                    [&](const std::string& h) { return h != hosts[first]; }))
      return static_cast<int>(first);
  }
  return -1;
}

}  // namespace kpipe::comm
