// Checkpoint bandwidth (DESIGN.md §5): writes and reads a checkpoint of a
// ~100M-parameter MLP (6 layers of 4096 x 4096 float32 weights, 403 MB)
// through io::write_checkpoint / io::read_checkpoint, the layers dealt
// round-robin over the ranks as a pipeline would hold them. Write: collective
// (parallel HDF5, temporary name, fsync, rename); read: every rank reads its
// layers and verifies their checksums plus its share of the others'. JSON on
// stdout; docs/performance.md compares it with dd on the same disk.
//
//   mpirun -n 2 checkpoint_benchmark [DIRECTORY (default .)] [REPEATS (default 3)]

#include <mpi.h>

#include <Kokkos_Core.hpp>
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kpipe/core/error.hpp"
#include "kpipe/io/checkpoint.hpp"
#include "kpipe/tensor/compat.hpp"

using namespace kpipe;

namespace {

constexpr int layers = 6;
constexpr int width = 4096;

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

nlohmann::json run(const std::string& directory, int repeats, int rank, int size) {
  std::vector<io::NamedMatrix<float>> mine;
  std::vector<io::ModelShape> shapes;
  for (int layer = rank; layer < layers; layer += size) {
    const std::string name = "layer" + std::to_string(layer) + ".weight";
    tensor::Matrix<float> value(Kokkos::view_alloc(Kokkos::WithoutInitializing, "kpipe::bench::weight"), width, width);
    Kokkos::deep_copy(value, 0.001f * static_cast<float>(layer + 1));
    mine.push_back({name, value});
    shapes.push_back({name, width, width});
  }
  const auto model = io::all_model_shapes(MPI_COMM_WORLD, shapes);
  const double file_bytes = static_cast<double>(layers) * width * width * sizeof(float);
  const double my_bytes = static_cast<double>(mine.size()) * width * width * sizeof(float);

  std::vector<double> writes, reads;
  io::CheckpointInfo info;
  info.schedule = "benchmark";
  std::string file;
  for (int repeat = 0; repeat < repeats; ++repeat) {
    info.step = repeat + 1;
    MPI_Barrier(MPI_COMM_WORLD);
    double start = MPI_Wtime();
    file = io::write_checkpoint<float>(MPI_COMM_WORLD, directory, info, mine, {}, 1, -1);
    MPI_Barrier(MPI_COMM_WORLD);
    writes.push_back(MPI_Wtime() - start);

    start = MPI_Wtime();
    io::read_checkpoint<float>(file, model, mine, {}, rank, size);
    MPI_Barrier(MPI_COMM_WORLD);
    reads.push_back(MPI_Wtime() - start);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) std::filesystem::remove(file);
  const double gib = 1024.0 * 1024.0 * 1024.0;
  return {{"ranks", size},
          {"parameters", static_cast<long long>(layers) * width * width},
          {"file_bytes", file_bytes},
          {"bytes_per_rank", my_bytes},
          {"repeats", repeats},
          {"write_seconds", writes},
          {"read_seconds", reads},
          {"write_gib_per_s_median", file_bytes / median(writes) / gib},
          {"read_gib_per_s_median", file_bytes / median(reads) / gib},
          {"note",
           "read: every rank reads its tensors and checksums its share of the rest, so the whole file "
           "is read once in all; the page cache may hold it (written just before)"}};
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  kpipe::tensor::compat::initialize(argc, argv);
  int rank = 0, size = 1, code = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  try {
    const std::string directory = argc > 1 ? argv[1] : ".";
    const int repeats = argc > 2 ? std::max(1, std::stoi(argv[2])) : 3;
    const nlohmann::json result = run(directory, repeats, rank, size);
    if (rank == 0) std::cout << result.dump(2) << std::endl;
  } catch (const Error& e) {
    std::fprintf(stderr, "checkpoint_benchmark: rank %d: error: %s\n", rank, e.what());
    code = e.exit_code();
  }
  Kokkos::finalize();
  MPI_Finalize();
  return code;
}
