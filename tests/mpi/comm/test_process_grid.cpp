#include <mpi.h>

#include "catch.hpp"
#include "kpipe/comm/collectives.hpp"
#include "kpipe/comm/process_grid.hpp"
#include "kpipe/core/error.hpp"

namespace comm = kpipe::comm;
using comm::ProcessGrid;

TEST_CASE("the grid splits the world into pipelines and data-parallel groups", "[comm]") {
  const int size = comm::size_of(comm::world());
  for (int stages = 1; stages <= size; ++stages) {
    if (size % stages != 0) continue;
    const ProcessGrid grid(MPI_COMM_WORLD, stages, 1, size / stages);
    // Independent truth: world rank = replica * p + stage.
    CHECK(grid.replica() * stages + grid.pipeline_rank() == grid.world_rank());
    int pipeline_size = 0, pipeline_rank = 0, data_size = 0;
    MPI_Comm_size(grid.pipeline(), &pipeline_size);
    MPI_Comm_rank(grid.pipeline(), &pipeline_rank);
    MPI_Comm_size(grid.data(), &data_size);
    CHECK(pipeline_size == stages);
    CHECK(pipeline_rank == grid.pipeline_rank());
    CHECK(data_size == size / stages);
    // Every member of my data-parallel group holds my stage.
    int min_stage = 0, max_stage = 0;
    const int stage = grid.pipeline_rank();
    MPI_Allreduce(&stage, &min_stage, 1, MPI_INT, MPI_MIN, grid.data());
    MPI_Allreduce(&stage, &max_stage, 1, MPI_INT, MPI_MAX, grid.data());
    CHECK(min_stage == stage);
    CHECK(max_stage == stage);
  }
}

TEST_CASE("a world size that is not p * d is an input error naming both", "[comm]") {
  const int size = comm::size_of(comm::world());
  try {
    ProcessGrid grid(MPI_COMM_WORLD, size + 1, 1, 1);
    FAIL("no error for a world of " << size << " ranks and " << size + 1 << " stages");
  } catch (const kpipe::Error& e) {
    CHECK(e.kind() == kpipe::ErrorKind::input);
    const std::string expected = "the job has " + std::to_string(size) +
                                 " MPI ranks, but pipeline.stages * "
                                 "pipeline.data_parallel = " +
                                 std::to_string(size + 1) + " * 1";
    CHECK(std::string(e.what()).rfind(expected, 0) == 0);
  }
}

TEST_CASE("the layout names every pipeline", "[comm]") {
  const int size = comm::size_of(comm::world());
  const ProcessGrid grid(MPI_COMM_WORLD, 2, 1, size / 2);
  const std::string layout = grid.layout();
  CHECK(layout.rfind("process grid: world " + std::to_string(size), 0) == 0);
  CHECK(layout.find("pipeline " + std::to_string(size / 2 - 1) + ": world ranks") != std::string::npos);
}

TEST_CASE("with tensor parallelism the closest ranks form a tensor group", "[comm]") {
  const int size = comm::size_of(comm::world());
  for (int t = 2; t <= size; ++t) {
    if (size % t != 0) continue;
    for (int stages = 1; stages <= size / t; ++stages) {
      if (size / t % stages != 0) continue;
      const int d = size / t / stages;
      INFO("p = " << stages << ", t = " << t << ", d = " << d);
      const ProcessGrid grid(MPI_COMM_WORLD, stages, t, d);
      // Independent truth: world rank = (replica * p + stage) * t + tensor rank.
      CHECK((grid.replica() * stages + grid.pipeline_rank()) * t + grid.tensor_rank() == grid.world_rank());
      int tensor_size = 0, tensor_rank = 0, pipeline_size = 0, data_size = 0;
      MPI_Comm_size(grid.tensor(), &tensor_size);
      MPI_Comm_rank(grid.tensor(), &tensor_rank);
      MPI_Comm_size(grid.pipeline(), &pipeline_size);
      MPI_Comm_size(grid.data(), &data_size);
      CHECK(tensor_size == t);
      CHECK(tensor_rank == grid.tensor_rank());
      CHECK(pipeline_size == stages);
      CHECK(data_size == d);
      // A tensor group shares one stage of one replica; a pipeline and a
      // data-parallel group share one tensor rank.
      const auto same_across = [](MPI_Comm group, int value) {
        int low = 0, high = 0;
        MPI_Allreduce(&value, &low, 1, MPI_INT, MPI_MIN, group);
        MPI_Allreduce(&value, &high, 1, MPI_INT, MPI_MAX, group);
        return low == value && high == value;
      };
      CHECK(same_across(grid.tensor(), grid.pipeline_rank()));
      CHECK(same_across(grid.tensor(), grid.replica()));
      CHECK(same_across(grid.pipeline(), grid.tensor_rank()));
      CHECK(same_across(grid.data(), grid.tensor_rank()));
      CHECK(same_across(grid.data(), grid.pipeline_rank()));
      CHECK(grid.layout().find("x " + std::to_string(t) + " tensor ranks") != std::string::npos);
    }
  }
}

TEST_CASE("a world size that is not p * t * d is an input error naming all three", "[comm]") {
  const int size = comm::size_of(comm::world());
  try {
    ProcessGrid grid(MPI_COMM_WORLD, size, 2, 1);
    FAIL("no error for a world of " << size << " ranks, " << size << " stages and t = 2");
  } catch (const kpipe::Error& e) {
    CHECK(e.kind() == kpipe::ErrorKind::input);
    CHECK(std::string(e.what()).find("pipeline.stages * pipeline.tensor_parallel * pipeline.data_parallel = " +
                                     std::to_string(size) + " * 2 * 1") != std::string::npos);
  }
}

// The tests' ranks all run on this host; a group of one is alone on it.
TEST_CASE("the grid counts the ranks that share this host", "[comm]") {
  const int size = comm::size_of(comm::world());
  const ProcessGrid grid(comm::world(), size, 1, 1);
  CHECK(grid.hosts().size() == static_cast<std::size_t>(size));
  CHECK(grid.ranks_on_node() == size);
  const ProcessGrid alone(comm::self(), 1, 1, 1);
  CHECK(alone.ranks_on_node() == 1);
}

TEST_CASE("host_layout lists each host's world ranks, nothing on one host", "[comm]") {
  CHECK(comm::host_layout({"a", "a", "a"}).empty());
  CHECK(comm::host_layout({"h1", "h1", "h2", "h2"}) == "hosts: h1 holds world ranks 0..1; h2 holds world ranks 2..3");
  CHECK(comm::host_layout({"x", "y", "x", "x", "y"}) == "hosts: x holds world ranks 0, 2..3; y holds world ranks 1, 4");
  CHECK(comm::host_layout({"x", "y"}) == "hosts: x holds world rank 0; y holds world rank 1");
}

TEST_CASE("first_split_tensor_group finds a tensor group across hosts", "[comm]") {
  CHECK(comm::first_split_tensor_group({"h1", "h1", "h2", "h2"}, 2) == -1);
  CHECK(comm::first_split_tensor_group({"h1", "h1", "h1", "h2", "h2", "h2"}, 2) == 2);
  CHECK(comm::first_split_tensor_group({"h1", "h2"}, 1) == -1);
}
