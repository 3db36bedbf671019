#pragma once
// What kpipe checks of a SentencePiece model file before the library parses
// it. The library trusts its files: a precompiled character map (the
// normaliser's double-array trie and its replacement strings) whose offsets
// lead outside the map makes it read wild memory, on the first text it
// normalises; an unknown model type, an out-of-range unknown id or a piece
// that is not UTF-8 it accepts. The check reads the protobuf wire format
// (ModelProto of the library's sentencepiece_model.proto) itself, merging
// repeated fields as protobuf does, and walks every state of each trie that
// a text can reach. A file that passes is then rehearsed in a child process
// (sentencepiece_tokenizer.cpp) before the rank loads it.

#include <string>
#include <string_view>

namespace kpipe::model::detail {

// How every refusal of a model file ends.
inline constexpr const char* train_one = "train one with examples/lm/prepare_bpe.sh";

// Throws an input error starting with `where` (e.g. "data.tokenizer_model
// 'x.model'") naming the first thing wrong with `bytes`.
void check_sentencepiece_model(std::string_view bytes, const std::string& where);

}  // namespace kpipe::model::detail
