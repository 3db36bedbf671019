#pragma once
// A token-stream dataset (docs/formats.md, "Token streams"): /train/tokens and
// /test/tokens hold 1-D int32 token ids, the root carries format =
// "kpipe-dataset", `vocabulary` (the symbols in token order, one UTF-8
// string) and optionally `vocabulary_size`. examples/data/bible_kjv.py writes
// one.
//
// Reading checks the layout of both splits (the groups, 1-D int32 tokens, the
// attributes) and throws one-line input errors naming the file and the
// object; it reads only the tokens of the split asked for. Whether the ids fit
// the vocabulary is the caller's check (runtime::load_tokens), since counting
// symbols means decoding UTF-8.

#include <cstdint>
#include <string>
#include <vector>

#include "kpipe/io/dataset.hpp"

namespace kpipe::io {

struct TokenStream {
  std::string vocabulary;             // the attribute's bytes: UTF-8 symbols in token order
  std::int64_t vocabulary_size = -1;  // the attribute, or -1 when the file has none
  std::vector<std::int32_t> tokens;   // the split's ids
};

// The tokens of `split` and the vocabulary of a validated token-stream file.
TokenStream read_token_stream(const std::string& file_name, Split split);

}  // namespace kpipe::io
