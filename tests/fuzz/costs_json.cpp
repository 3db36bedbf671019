// Fuzzes the reader of `--costs` JSON: a cost fit or the summary that
// `kpipe run --json` and `sweep --json` write.

#include <string>

#include "fuzz_target.hpp"
#include "kpipe/schedule/calibration.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  kpipe::fuzz::expect_accepted_or_refused(
      [&] { kpipe::schedule::read_costs_json(std::string(kpipe::fuzz::text_of(data, size)), "fuzz.json"); });
  return 0;
}
