// Checkpoint bandwidth (DESIGN.md §5) against dd on the same file system, in
// one run: writes and reads a checkpoint of about PARAMETERS float32
// parameters (layers of 2048 x 2048 weights, dealt round-robin over the ranks
// as a pipeline would hold them) through io::write_checkpoint and
// io::read_checkpoint, and after each, dd writing (zeros, conv=fsync, as the
// checkpoint is synced) and reading a file of the same size in
// DIRECTORY; the fractions of dd are medians of those pairs. Write: collective
// (parallel HDF5, temporary name, each tensor's bytes by its holder through
// io::UncachedFile, fsync, rename); read: every rank reads its layers, in
// file order, and verifies their checksums, the file's only datasets (each
// read rehearsed in a child first, io::hdf5::Rehearsal). Before every read the page
// cache is dropped when this process may (root), so reads come from the disk;
// the JSON says whether it was, and whether the tensors' writes went past the
// page cache (tensor_writes_direct_io). JSON on stdout; docs/performance-log.md.
//
//   mpirun -n 2 checkpoint_benchmark [DIRECTORY (.)] [REPEATS (3)] [PARAMETERS (1e8)]

#include <mpi.h>

#include <Kokkos_Core.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "kpipe/core/error.hpp"
#include "kpipe/io/checkpoint.hpp"
#include "kpipe/io/uncached_file.hpp"
#include "kpipe/runtime/persistence/checkpoint_ranks.hpp"
#include "kpipe/tensor/compat.hpp"

using namespace kpipe;

namespace {

constexpr int width = 2048;
constexpr double megabyte = 1e6;

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

// Writes back and drops the page cache (root only); whether it could.
bool drop_page_cache() {
  std::ofstream control("/proc/sys/vm/drop_caches");
  if (!control) return false;
  control << "3\n";
  return static_cast<bool>(control.flush());
}

// Seconds `command` took through the shell; throws when it failed.
double timed(const std::string& command) {
  const double start = MPI_Wtime();
  if (std::system(command.c_str()) != 0) throw runtime_error("failed: " + command);
  return MPI_Wtime() - start;
}

// Seconds dd takes to write `mib` MiB into `probe` (synced, as a checkpoint
// is) and to read them back, on rank 0, the page cache dropped between when
// `drop`.
std::pair<double, double> time_dd(const std::string& probe, long mib, bool drop) {
  const double write =
      timed("dd if=/dev/zero of='" + probe + "' bs=1M count=" + std::to_string(mib) + " conv=fsync status=none");
  if (drop) drop_page_cache();
  return {write, timed("dd if='" + probe + "' of=/dev/null bs=1M status=none")};
}

// Median of a[i] / b[i].
double median_ratio(const std::vector<double>& a, const std::vector<double>& b) {
  std::vector<double> ratios;
  for (std::size_t i = 0; i < a.size(); ++i) ratios.push_back(a[i] / b[i]);
  return median(ratios);
}

nlohmann::json run(const std::string& directory, int repeats, double parameters, int rank, int size) {
  const int layers = std::max(1, static_cast<int>(std::lround(parameters / (double{width} * width))));
  std::vector<io::NamedMatrix<float>> mine;
  std::vector<io::ModelShape> shapes;
  for (int layer = rank; layer < layers; layer += size) {
    const std::string name = "layer" + std::to_string(layer) + ".weight";
    tensor::Matrix<float> value(Kokkos::view_alloc(Kokkos::WithoutInitializing, "kpipe::bench::weight"), width, width);
    Kokkos::deep_copy(value, 0.001f * static_cast<float>(layer + 1));
    mine.push_back({name, value});
    shapes.push_back({name, width, width});
  }
  const auto model = io::all_model_shapes(kpipe::runtime::CheckpointRanks(MPI_COMM_WORLD, "a checkpoint"), shapes);
  const double file_bytes = static_cast<double>(layers) * width * width * sizeof(float);
  const std::string probe = (std::filesystem::path(directory) / "kpipe-dd-probe").string();

  bool dropped = false;
  if (rank == 0) dropped = drop_page_cache();
  MPI_Bcast(&dropped, 1, MPI_CXX_BOOL, 0, MPI_COMM_WORLD);
  std::vector<double> writes, reads, dd_writes, dd_reads;
  io::CheckpointInfo info;
  info.schedule = "benchmark";
  std::string file;
  // Each repeat times dd beside the checkpoint: a virtual disk's rate moves
  // within minutes, so only ratios of neighbours mean much.
  for (int repeat = 0; repeat < repeats; ++repeat) {
    info.step = repeat + 1;
    MPI_Barrier(MPI_COMM_WORLD);
    double start = MPI_Wtime();
    file = io::write_checkpoint<float>(kpipe::runtime::CheckpointRanks(MPI_COMM_WORLD, "a checkpoint"), directory, info,
                                       mine, {}, 1, -1);
    MPI_Barrier(MPI_COMM_WORLD);
    writes.push_back(MPI_Wtime() - start);

    if (rank == 0 && dropped) drop_page_cache();
    MPI_Barrier(MPI_COMM_WORLD);
    start = MPI_Wtime();
    io::read_checkpoint<float>(file, model, mine, {}, rank, size);
    MPI_Barrier(MPI_COMM_WORLD);
    reads.push_back(MPI_Wtime() - start);

    if (rank == 0) {
      const auto [write, read] = time_dd(probe, std::lround(file_bytes / (1 << 20)), dropped);
      dd_writes.push_back(write);
      dd_reads.push_back(read);
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank != 0) return {};
  std::filesystem::remove(file);
  // The route the tensors' writes took in this directory (the same test on a file there).
  const bool direct = io::UncachedFile(probe, io::UncachedFile::Access::write).direct();
  std::filesystem::remove(probe);

  const auto rate = [&](const std::vector<double>& seconds) { return file_bytes / median(seconds) / megabyte; };
  return {{"ranks", size},
          {"parameters", static_cast<long long>(layers) * width * width},
          {"file_bytes", file_bytes},
          {"repeats", repeats},
          {"page_cache_dropped_before_reads", dropped},
          {"tensor_writes_direct_io", direct},
          {"write_seconds", writes},
          {"read_seconds", reads},
          {"dd_write_seconds", dd_writes},
          {"dd_read_seconds", dd_reads},
          {"write_mb_per_s_median", rate(writes)},
          {"read_mb_per_s_median", rate(reads)},
          {"dd_write_mb_per_s_median", rate(dd_writes)},
          {"dd_read_mb_per_s_median", rate(dd_reads)},
          {"write_fraction_of_dd", median_ratio(dd_writes, writes)},
          {"read_fraction_of_dd", median_ratio(dd_reads, reads)}};
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
    const double parameters = argc > 3 ? std::stod(argv[3]) : 1e8;
    const nlohmann::json result = run(directory, repeats, parameters, rank, size);
    if (rank == 0) std::cout << result.dump(2) << std::endl;
  } catch (const Error& e) {
    std::fprintf(stderr, "checkpoint_benchmark: rank %d: error: %s\n", rank, e.what());
    code = e.exit_code();
  } catch (const std::logic_error& e) {  // std::stoi, std::stod
    if (rank == 0)
      std::fprintf(stderr, "checkpoint_benchmark: usage: [DIRECTORY] [REPEATS] [PARAMETERS] (%s)\n", e.what());
    code = 2;
  }
  Kokkos::finalize();
  MPI_Finalize();
  return code;
}
