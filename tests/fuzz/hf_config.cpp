// Fuzzes kpipe import's reading of a Hugging Face config.json: the JSON
// bounds, the model_type's format and every model key it reads (the
// directory holds no weights, so an accepted config ends in the missing
// weights' refusal).

#include <filesystem>

#include "fuzz_target.hpp"
#include "kpipe/runtime/interop/hf_format.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::filesystem::path config = kpipe::fuzz::scratch_file(data, size, "config.json");
  kpipe::fuzz::expect_accepted_or_refused([&] { kpipe::runtime::hf::read_directory(config.parent_path().string()); });
  return 0;
}
