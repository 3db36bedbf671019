// Fuzzes the checkpoint reader (checkpoint.restart) on mutated HDF5 files:
// format and schema checks, the model's names and shapes, the checksums and
// the loads, for the model of tests/data/checkpoints/tiny.toml (an MLP 4-4-2
// with AdamW), whose good.h5 seeds the corpus.

#include <Kokkos_Core.hpp>

#include <cstdlib>
#include <string>
#include <vector>

#include "fuzz_target.hpp"
#include "kpipe/io/checkpoint.hpp"
#include "kpipe/tensor/compat.hpp"

namespace {

using Tensors = std::vector<kpipe::io::NamedMatrix<float>>;

const std::vector<kpipe::io::ModelShape> tiny_model = {
    {"layer0.bias", 1, 4}, {"layer0.weight", 4, 4}, {"layer1.bias", 1, 2}, {"layer1.weight", 4, 2}};

Tensors tensors(const std::vector<std::string>& suffixes) {
  Tensors out;
  for (const auto& shape : tiny_model)
    for (const auto& suffix : suffixes)
      out.push_back({shape.name + suffix, kpipe::tensor::Matrix<float>(shape.name, shape.rows, shape.cols)});
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  kpipe::tensor::compat::initialize(*argc, *argv);
  std::atexit([] { Kokkos::finalize(); });
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = kpipe::fuzz::scratch_file(data, size, "step-1.h5");
  kpipe::fuzz::expect_accepted_or_refused([&] {
    const Tensors parameters = tensors({""});
    const Tensors optimizer = tensors({".exp_avg", ".exp_avg_sq"});
    const kpipe::io::CheckpointInfo info = kpipe::io::read_checkpoint(path, tiny_model, parameters, optimizer);
    if (info.step < 0 || info.optimizer_steps < 0) kpipe::fuzz::fail("a negative step accepted", path);
  });
  return 0;
}
