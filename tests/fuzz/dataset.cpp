// Fuzzes the HDF5 dataset reader (data.source = "hdf5") on mutated files:
// the layout checks of both splits, then the first and last row of each, as
// a run's data feed reads them. tests/data/datasets seeds the corpus.

#include <string>
#include <vector>

#include "fuzz_target.hpp"
#include "kpipe/io/dataset.hpp"

namespace {

void read_split(const std::string& path, kpipe::io::Split split) {
  const kpipe::io::DatasetFile file(path, split);
  if (file.rows() <= 0) return;
  const std::int64_t rows[2] = {0, file.rows() - 1};
  std::vector<float> features(2 * static_cast<std::size_t>(file.features()));
  file.read_features(rows, 2, features.data());
  if (file.has_labels()) {
    int labels[2];
    file.read_labels(rows, 2, labels);
  } else {
    std::vector<float> targets(2 * static_cast<std::size_t>(file.outputs()));
    file.read_targets(rows, 2, targets.data());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = kpipe::fuzz::scratch_file(data, size, "dataset.h5");
  kpipe::fuzz::expect_accepted_or_refused([&] {
    read_split(path, kpipe::io::Split::train);
    read_split(path, kpipe::io::Split::test);
  });
  return 0;
}
