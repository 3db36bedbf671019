// Fuzzes the profile reader on mutated HDF5 files as `--costs PROFILE` reads
// them: the tables, their times and counts, the timelines of every step and
// the calibration fitted from them. tests/data/profiles/good.h5 seeds it.

#include <string>

#include "fuzz_target.hpp"
#include "kpipe/runtime/measurement/cost_file.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = kpipe::fuzz::scratch_file(data, size, "profile.h5");
  kpipe::fuzz::expect_accepted_or_refused([&] { kpipe::runtime::read_cost_file(path); });
  return 0;
}
