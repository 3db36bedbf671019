#include "kpipe/runtime/data/token_source.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>

#include "kpipe/core/error.hpp"
#include "kpipe/core/input_file.hpp"
#include "kpipe/core/limits.hpp"
#include "kpipe/core/strings.hpp"
#include "kpipe/io/token_stream.hpp"
#include "kpipe/model/data/markov_tokens.hpp"
#include "kpipe/model/data/token_stream.hpp"

namespace kpipe::runtime {

namespace {

// The built-in sources that hold a token stream; a project's source feeds a
// transformer through its own factory, never through these readers.
enum class Stream { text, hdf5, synthetic };

Stream token_stream_of(const config::DataConfig& data) {
  if (data.source == "text") return Stream::text;
  if (data.source == "hdf5") return Stream::hdf5;
  if (data.source == "synthetic") return Stream::synthetic;
  throw input_error(fmt::format(
      "data.source = \"{}\" holds no token stream kpipe can read; a transformer's vocabulary and tokens come from "
      "\"synthetic\", \"hdf5\" or \"text\"",
      printable(data.source)));
}

// One split of a stream and what the checks need to name it.
struct Loaded {
  std::vector<std::int32_t> tokens;
  int vocabulary_size = 0;
  std::string vocabulary_text;  // "65 distinct characters", for the model.vocab message
  std::int64_t characters = 0;  // the characters the tokens spell (text), else 0
};

const char* split_name(io::Split split) { return split == io::Split::train ? "training" : "validation"; }

// The text, bounded and checked as every input file is (a FIFO, a device or a
// file beyond limits::text_data_bytes is refused before it is read), and
// non-empty. SentencePiece takes it in one call, so its bound is lower.
std::string text_of(const config::DataConfig& data) {
  std::error_code unknown;
  const std::uintmax_t bytes = std::filesystem::file_size(data.path, unknown);
  if (data.tokenizer == config::TokenizerKind::sentencepiece && !unknown && bytes > limits::subword_text_bytes) {
    throw input_error(fmt::format(
        "data.path '{}' is {} bytes, more than the {} kpipe encodes with SentencePiece (the library takes a text in "
        "one piece, at about 80 bytes of memory a byte); split the corpus, or train on characters "
        "(data.tokenizer = \"char\")",
        printable(data.path), bytes, limits::subword_text_bytes));
  }
  std::string text = read_input_file(
      data.path, {"data.path", limits::text_data_bytes,
                  "; set data.path to a UTF-8 text file (a corpus beyond the limit goes into an HDF5 token stream, "
                  "docs/formats.md)"});
  if (text.empty()) {
    throw input_error(
        fmt::format("data.path '{}' is empty; set data.path to a UTF-8 text file to train on", data.path));
  }
  return text;
}

std::string text_name(const std::string& path) { return fmt::format("data.path '{}'", path); }

// The characters of `text`, which must be valid UTF-8.
std::size_t characters_of(const std::string& text, const std::string& path) {
  std::size_t characters = 0;
  model::for_each_code_point(text, text_name(path), [&](char32_t) { ++characters; });
  return characters;
}

// Characters before this index train, the rest validate (bible_kjv.py's
// int(0.9 N), exactly), whatever the tokenizer: every tokenizer validates on
// the same text.
std::size_t train_characters(std::size_t n) { return n * 9 / 10; }

// The byte offset of code point `index` of valid UTF-8 `text`.
std::size_t byte_offset(const std::string& text, std::size_t index) {
  std::size_t seen = 0;
  for (std::size_t at = 0; at < text.size(); ++at) {
    const bool starts_character = (static_cast<unsigned char>(text[at]) & 0xc0U) != 0x80;
    if (starts_character && seen++ == index) return at;
  }
  return text.size();
}

// The tokenizer of a text file: its characters, or a SentencePiece model.
std::unique_ptr<model::Tokenizer> text_tokenizer(const config::DataConfig& data, const std::string& text) {
  if (data.tokenizer == config::TokenizerKind::sentencepiece) return model::load_sentencepiece(data.tokenizer_model);
  return std::make_unique<model::Vocabulary>(model::Vocabulary::of_text(text, text_name(data.path)));
}

Loaded text_split(const config::DataConfig& data, io::Split split) {
  // The text is decoded on the fly, never held in code points: the load's
  // peak is the text and the tokens of a split (text_corpus_peak_bytes).
  const std::string text = text_of(data);
  const std::size_t characters = characters_of(text, data.path);
  const std::unique_ptr<model::Tokenizer> tokenizer = text_tokenizer(data, text);
  const std::size_t middle = train_characters(characters);
  const bool train = split == io::Split::train;
  // Each part encoded alone: subwords never straddle the cut.
  const std::size_t at = byte_offset(text, middle);
  const std::string_view part = train ? std::string_view(text).substr(0, at) : std::string_view(text).substr(at);
  Loaded loaded;
  loaded.tokens = tokenizer->encode(part, text_name(data.path));
  loaded.vocabulary_size = tokenizer->size();
  loaded.vocabulary_text = tokenizer->description();
  loaded.characters = static_cast<std::int64_t>(train ? middle : characters - middle);
  return loaded;
}

// The file's vocabulary, its vocabulary_size attribute checked against it.
model::Vocabulary hdf5_vocabulary(const std::string& path, const io::TokenStream& stream) {
  model::Vocabulary vocabulary(
      model::decode_utf8(stream.vocabulary, fmt::format("the vocabulary attribute of data.path '{}'", path)));
  if (stream.vocabulary_size >= 0 && stream.vocabulary_size != vocabulary.size()) {
    throw input_error(
        fmt::format("data.path '{}': the attribute vocabulary_size = {} but vocabulary holds {} "
                    "symbols; rewrite the file with matching attributes",
                    path, stream.vocabulary_size, vocabulary.size()));
  }
  return vocabulary;
}

Loaded hdf5_split(const std::string& path, io::Split split) {
  auto stream = io::read_token_stream(path, split);
  const auto vocabulary = hdf5_vocabulary(path, stream);
  const auto outside = std::find_if(stream.tokens.begin(), stream.tokens.end(),
                                    [&](std::int32_t id) { return id < 0 || id >= vocabulary.size(); });
  if (outside != stream.tokens.end()) {
    throw input_error(
        fmt::format("data.path '{}': /{}/tokens[{}] = {} is outside the vocabulary's [0, {}); rewrite "
                    "the file with ids that index its vocabulary attribute",
                    path, io::name_of(split), outside - stream.tokens.begin(), *outside, vocabulary.size()));
  }
  Loaded loaded;
  loaded.tokens = std::move(stream.tokens);
  loaded.vocabulary_size = vocabulary.size();
  loaded.vocabulary_text = fmt::format("a vocabulary of {} symbols", vocabulary.size());
  return loaded;
}

Loaded synthetic_split(const model::TrainerSpec& spec, io::Split split) {
  Loaded loaded;
  loaded.tokens = model::markov_split(spec.model.vocab, spec.model.context, spec.data.seed, split == io::Split::train);
  loaded.vocabulary_size = spec.model.vocab;
  return loaded;
}

// The data against the model: one line naming both numbers and the fix.
void check_against_model(const Loaded& loaded, const config::DataConfig& data, const model::TrainerSpec& spec,
                         io::Split split) {
  const std::string where = token_stream_of(data) == Stream::synthetic ? "the synthetic stream" : "'" + data.path + "'";
  // The synthetic stream is drawn over model.vocab symbols, so only files can disagree.
  if (token_stream_of(data) != Stream::synthetic && loaded.vocabulary_size != spec.model.vocab) {
    throw input_error(fmt::format("model.vocab = {} but data.path {} has {}; set model.vocab = {}", spec.model.vocab,
                                  where, loaded.vocabulary_text, loaded.vocabulary_size));
  }
  const std::int64_t needed = std::int64_t{spec.model.context} + 1;
  if (static_cast<std::int64_t>(loaded.tokens.size()) < needed) {
    throw input_error(
        fmt::format("model.context = {} needs at least {} tokens, but the {} split of {} has {}; lower "
                    "model.context or use more text",
                    spec.model.context, needed, split_name(split), where, loaded.tokens.size()));
  }
}

}  // namespace

std::shared_ptr<const std::vector<std::int32_t>> load_tokens(const config::DataConfig& data,
                                                             const model::TrainerSpec& spec, io::Split split) {
  Loaded loaded;
  switch (token_stream_of(data)) {
    case Stream::text:
      loaded = text_split(data, split);
      break;
    case Stream::hdf5:
      loaded = hdf5_split(data.path, split);
      break;
    case Stream::synthetic:
      loaded = synthetic_split(spec, split);
      break;
  }
  check_against_model(loaded, data, spec, split);
  return std::make_shared<const std::vector<std::int32_t>>(std::move(loaded.tokens));
}

std::int64_t text_corpus_peak_bytes(const config::DataConfig& data, bool validation) {
  if (data.source != "text") return 0;  // also a project's registered source, which token_stream_of refuses
  std::error_code error;
  const auto bytes = static_cast<std::int64_t>(std::filesystem::file_size(data.path, error));
  if (error) return 0;  // the load names what is wrong with the path
  const std::int64_t loading = 5 * bytes, training_tokens = 4 * (bytes * 9 / 10);
  return validation ? training_tokens + loading : loading;
}

model::Vocabulary synthetic_vocabulary(int size) {
  std::vector<char32_t> symbols;
  symbols.reserve(static_cast<std::size_t>(std::max(size, 0)));
  for (char32_t c = 0x20; static_cast<int>(symbols.size()) < size; ++c) {
    if (c > 0x10ffff) {
      throw input_error(
          fmt::format("model.vocab = {} is more than the {} printable symbols a synthetic vocabulary "
                      "has; lower model.vocab",
                      size, symbols.size()));
    }
    const bool control = c == 0x7f || (c >= 0x80 && c <= 0xa0) || c == 0xad;
    const bool surrogate = c >= 0xd800 && c <= 0xdfff;
    if (!control && !surrogate) symbols.push_back(c);
  }
  return model::Vocabulary(std::move(symbols));
}

std::unique_ptr<model::Tokenizer> load_tokenizer(const config::DataConfig& data, int vocab) {
  std::unique_ptr<model::Tokenizer> tokenizer;
  std::string described;
  switch (token_stream_of(data)) {
    case Stream::text:
      tokenizer = text_tokenizer(data, text_of(data));
      described = fmt::format("data.path '{}' has {}", data.path, tokenizer->description());
      break;
    case Stream::hdf5:
      tokenizer = std::make_unique<model::Vocabulary>(
          hdf5_vocabulary(data.path, io::read_token_stream(data.path, io::Split::train)));
      described = fmt::format("data.path '{}' has a vocabulary of {} symbols", data.path, tokenizer->size());
      break;
    case Stream::synthetic:
      return std::make_unique<model::Vocabulary>(synthetic_vocabulary(vocab));
  }
  if (tokenizer->size() != vocab) {
    throw input_error(
        fmt::format("model.vocab = {} but {}; set model.vocab = {}", vocab, described, tokenizer->size()));
  }
  return tokenizer;
}

double characters_per_token(const config::DataConfig& data, const model::TrainerSpec& spec) {
  if (token_stream_of(data) != Stream::text || data.tokenizer == config::TokenizerKind::character) return 1.0;
  const Loaded validation = text_split(data, io::Split::test);
  check_against_model(validation, data, spec, io::Split::test);
  // Packed documents: the predictions at separators take no loss.
  const auto separators = std::count(validation.tokens.begin(), validation.tokens.end(), spec.document_separator);
  return static_cast<double>(validation.characters) / static_cast<double>(validation.tokens.size() - separators);
}

template <class Scalar>
std::unique_ptr<model::DataSource<Scalar>> make_token_source(const config::DataConfig& data,
                                                             const model::TrainerSpec& spec, io::Split split,
                                                             tensor::ExecContext& exec) {
  model::TokenStreamSpec stream;
  stream.sampling = split == io::Split::train ? model::TokenSampling::random_windows : model::TokenSampling::windows;
  stream.seed = spec.data.seed;
  stream.context = spec.model.context;
  stream.global_batch = spec.global_batch;
  stream.separator = spec.document_separator;
  return std::make_unique<model::TokenStreamSource<Scalar>>(load_tokens(data, spec, split), stream, exec);
}

template std::unique_ptr<model::DataSource<float>> make_token_source<float>(const config::DataConfig&,
                                                                            const model::TrainerSpec&, io::Split,
                                                                            tensor::ExecContext&);
template std::unique_ptr<model::DataSource<double>> make_token_source<double>(const config::DataConfig&,
                                                                              const model::TrainerSpec&, io::Split,
                                                                              tensor::ExecContext&);

}  // namespace kpipe::runtime
