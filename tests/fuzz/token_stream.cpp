// Fuzzes the token-stream reader (model.kind = "transformer", data.source =
// "hdf5") on mutated files: the layout of both splits and the vocabulary
// attribute, decoded as `kpipe generate` decodes it.

#include <string>

#include "fuzz_target.hpp"
#include "kpipe/io/token_stream.hpp"
#include "kpipe/model/data/vocabulary.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = kpipe::fuzz::scratch_file(data, size, "tokens.h5");
  kpipe::fuzz::expect_accepted_or_refused([&] {
    for (const auto split : {kpipe::io::Split::train, kpipe::io::Split::test}) {
      const kpipe::io::TokenStream stream = kpipe::io::read_token_stream(path, split);
      if (!stream.vocabulary.empty())
        kpipe::model::Vocabulary(kpipe::model::decode_utf8(stream.vocabulary, "the vocabulary attribute"));
    }
  });
  return 0;
}
