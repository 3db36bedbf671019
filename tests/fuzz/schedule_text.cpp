// Fuzzes the schedule text reader (schedule.file): parsing, lowering a
// compute-only schedule and validation, as `kpipe run` and `plan` read it.

#include "fuzz_target.hpp"
#include "kpipe/schedule/text_form.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  kpipe::fuzz::expect_accepted_or_refused([&] {
    kpipe::schedule::checked_schedule(kpipe::schedule::parse_text(kpipe::fuzz::text_of(data, size), "fuzz.txt"));
  });
  return 0;
}
