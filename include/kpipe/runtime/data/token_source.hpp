#pragma once
// A transformer's data (model.kind = "transformer"): a token stream split in
// two, served as model::TokenStreamSource sequences. make_data_source calls
// make_token_source for a transformer; `kpipe generate` calls load_tokenizer
// to encode its prompt and decode its samples.
//
// data.source picks the stream:
//   text       data.path is UTF-8 text; its first 90% of characters
//              (floor(N·9/10)) train, the rest validate, as
//              examples/data/bible_kjv.py splits. data.tokenizer = "char": the
//              vocabulary is the sorted distinct code points of the whole
//              file, the tokens their indices; "sentencepiece": each part is
//              encoded by the SentencePiece model data.tokenizer_model.
//   hdf5       a token-stream file (docs/formats.md, "Token streams"):
//              /train/tokens, /test/tokens and the vocabulary attribute.
//   synthetic  model::markov_tokens over model.vocab symbols from data.seed:
//              max(2^16, 16(T+1)) train and max(2^13, 4(T+1)) test tokens;
//              its vocabulary is synthetic_vocabulary(model.vocab).
// The data must match the model: its vocabulary size is model.vocab, and each
// split holds at least model.context + 1 tokens (input errors saying which
// value to set).

#include <cstdint>
#include <memory>
#include <vector>

#include "kpipe/config/run_config.hpp"
#include "kpipe/io/dataset.hpp"
#include "kpipe/model/data/data_source.hpp"
#include "kpipe/model/data/tokenizer.hpp"
#include "kpipe/model/data/vocabulary.hpp"
#include "kpipe/model/training/trainer.hpp"
#include "kpipe/tensor/exec_context.hpp"

namespace kpipe::runtime {

// Token ids of split `split` (train, or test for validation and inference) of
// the configured stream, checked against spec.model (vocab, context).
std::shared_ptr<const std::vector<std::int32_t>> load_tokens(const config::DataConfig& data,
                                                             const model::TrainerSpec& spec, io::Split split);

// The most host memory a text corpus (data.source = "text") takes in each
// rank that loads it, for the memory estimate: while a split loads, the file
// and the split's tokens, decoded from it on the fly (under 5 bytes per
// byte), then the training split's tokens (4 bytes per character, at most
// 0.9 of the bytes), which stay while `validation` loads the other split. 0 for the
// other sources, whose token streams are small or read by rows.
std::int64_t text_corpus_peak_bytes(const config::DataConfig& data, bool validation);

// The tokenizer whose ids the configured stream holds, checked against
// model.vocab = `vocab`.
std::unique_ptr<model::Tokenizer> load_tokenizer(const config::DataConfig& data, int vocab);

// Characters per token of the validation split: 1 but for subword tokens, so
// that loss per token / ln 2 / this is bits per character, the measure that
// compares tokenizers.
double characters_per_token(const config::DataConfig& data, const model::TrainerSpec& spec);

// The synthetic stream's symbols: the first `size` printable characters in
// code point order: ' ' to '~' (95), then from U+00A1 on, skipping the soft
// hyphen U+00AD and the surrogates. Enough for any realistic model.vocab; past
// U+10FFFF it is an input error.
model::Vocabulary synthetic_vocabulary(int size);

// Sequences of T = model.context tokens from `split`: random windows seeded
// by data.seed for train, consecutive windows for test.
template <class Scalar>
std::unique_ptr<model::DataSource<Scalar>> make_token_source(const config::DataConfig& data,
                                                             const model::TrainerSpec& spec, io::Split split,
                                                             tensor::ExecContext& exec);

}  // namespace kpipe::runtime
