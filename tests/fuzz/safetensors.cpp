// Fuzzes the safetensors reader of kpipe import: the header's length, its
// JSON, each tensor's dtype, shape and byte range, before anything is
// allocated for them.

#include "kpipe/io/safetensors.hpp"
#include "fuzz_target.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = kpipe::fuzz::scratch_file(data, size, "model.safetensors");
  kpipe::fuzz::expect_accepted_or_refused([&] { (void)kpipe::io::read_safetensors(path); });
  return 0;
}
