// A transformer's data: text files and HDF5 token streams written at test
// time, the synthetic Markov stream, the 90/10 split, make_data_source's
// dispatch, the vocabulary for `kpipe generate`, subword tokens of a
// SentencePiece model, and every input error the user can meet, each naming
// the value to change.
#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "catch.hpp"
#include "input_error.hpp"
#include "kpipe/core/error.hpp"
#include "kpipe/io/dataset.hpp"
#include "kpipe/io/hdf5.hpp"
#include "kpipe/model/data/token_stream.hpp"
#include "kpipe/runtime/data/data_source_kind.hpp"
#include "kpipe/runtime/data/dataset_source.hpp"
#include "kpipe/runtime/data/token_source.hpp"

using namespace kpipe;
using kpipe::test::input_error_of;
namespace fs = std::filesystem;

namespace {

// A private directory for the test's files, removed with everything in it.
struct TempDir {
  fs::path path = fs::temp_directory_path() / ("kpipe-test-tokens-" + std::to_string(::getpid()));
  TempDir() { fs::create_directories(path); }
  ~TempDir() { fs::remove_all(path); }
  std::string write(const std::string& name, const std::string& bytes) const {
    std::ofstream(path / name, std::ios::binary) << bytes;
    return (path / name).string();
  }
};

model::TrainerSpec transformer(int vocab, int context, int global_batch = 4) {
  model::TrainerSpec spec;
  spec.model.kind = "transformer";
  spec.model.vocab = vocab;
  spec.model.vocab_divisible_by = 1;
  spec.model.context = context;
  spec.global_batch = global_batch;
  spec.data.seed = 11;
  return spec;
}

config::DataConfig data_of(const std::string& source, const std::string& path) {
  config::DataConfig data;
  data.source = source;
  data.path = path;
  data.seed = 11;
  return data;
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// 40 lines of "line k: é\n" (k < 40): 430 characters, 18 distinct.
std::string sample_text() {
  std::string text;
  for (int k = 0; k < 40; ++k) text += fmt::format("line {}: \xc3\xa9\n", k);
  return text;
}

void write_token_file(const std::string& path, const std::string& vocabulary, const std::vector<std::int32_t>& train,
                      const std::vector<std::int32_t>& test, io::hdf5::Type test_type = io::hdf5::Type::int32) {
  auto file = io::hdf5::File::create(path, io::hdf5::File::Exists::truncate);
  file.set_attribute("format", io::DatasetFile::format_name);
  file.set_attribute("format_version", io::DatasetFile::format_version);
  file.set_attribute("vocabulary", vocabulary);
  file.create_group("train").write("tokens", train);
  auto group = file.create_group("test");
  if (test_type == io::hdf5::Type::int32) {
    group.write("tokens", test);
  } else {
    group.write("tokens", std::vector<float>(test.begin(), test.end()));
  }
}

}  // namespace

TEST_CASE("text source: the file's sorted characters are the vocabulary; 90% train, 10% validate",
          "[runtime][tokens]") {
  const TempDir dir;
  const std::string text = sample_text();
  const auto path = dir.write("sample.txt", text);
  const auto data = data_of("text", path);
  // "\n", " ", "0"-"9", ":", "e", "i", "l", "n", "é"
  const auto spec = transformer(18, 8);
  const auto tokenizer = runtime::load_tokenizer(data, spec.model.vocab);
  const auto& vocabulary = dynamic_cast<const model::Vocabulary&>(*tokenizer);
  CHECK(vocabulary.size() == 18);
  CHECK(vocabulary.utf8() == "\n 0123456789:eiln\xc3\xa9");
  const auto train = runtime::load_tokens(data, spec, io::Split::train);
  const auto test = runtime::load_tokens(data, spec, io::Split::test);
  const auto all = vocabulary.encode(text);
  CHECK(train->size() == all.size() * 9 / 10);
  CHECK(train->size() + test->size() == all.size());
  CHECK(vocabulary.decode(*train) + vocabulary.decode(*test) == text);
}

TEST_CASE("text source: sequences and shifted targets through make_data_source", "[runtime][tokens]") {
  const TempDir dir;
  const auto path = dir.write("sample.txt", sample_text());
  const auto data = data_of("text", path);
  const int T = 8, rows = 4;
  const auto spec = transformer(18, T);
  tensor::ExecContext exec;
  for (const io::Split split : {io::Split::train, io::Split::test}) {
    const auto source = runtime::make_data_source<float>(data, spec, split, exec);
    const auto* tokens = dynamic_cast<const model::TokenStreamSource<float>*>(source.get());
    REQUIRE(tokens != nullptr);
    CHECK(*runtime::load_tokens(data, spec, split) == tokens->tokens());
    CHECK(source->samples() == static_cast<std::int64_t>(tokens->tokens().size() - 1) / T);
    const auto X = tensor::uninitialized_matrix<float>("test::X", rows, T);
    model::Targets<float> targets;
    targets.labels = tensor::Labels("test::y", rows * T);
    source->fill_inputs(2, 1, X);
    source->fill_targets(2, 1, targets);
    const auto x = tensor::to_host<float>(X);
    const auto y = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), targets.labels);
    for (int r = 0; r < rows; ++r) {
      const std::int64_t start = tokens->start(2, 1 + r);
      if (split == io::Split::test) CHECK(start == (2 * 4 + 1 + r) % source->samples() * T);
      for (int t = 0; t < T; ++t) {
        CHECK(x[r * T + t] == static_cast<float>(tokens->tokens()[start + t]));
        CHECK(y(r * T + t) == tokens->tokens()[start + t + 1]);
      }
    }
  }
}

TEST_CASE("text source: input errors name the value and the fix", "[runtime][tokens]") {
  const TempDir dir;
  const auto path = dir.write("x.txt", sample_text());
  const auto data = data_of("text", path);
  auto message = input_error_of([&] { runtime::load_tokens(data, transformer(80, 8), io::Split::train); });
  CHECK(contains(message, fmt::format("model.vocab = 80 but data.path '{}' has 18 distinct characters; set "
                                      "model.vocab = 18",
                                      path)));
  message = input_error_of([&] { runtime::load_tokenizer(data, 80); });
  CHECK(contains(message, "set model.vocab = 18"));
  // 430 characters: 387 train, 43 validate.
  message = input_error_of([&] { runtime::load_tokens(data, transformer(18, 64), io::Split::test); });
  CHECK(contains(message, fmt::format("model.context = 64 needs at least 65 tokens, but the validation split of "
                                      "'{}' has 43; lower model.context or use more text",
                                      path)));
  message = input_error_of([&] { runtime::load_tokens(data, transformer(18, 400), io::Split::train); });
  CHECK(contains(message, "the training split"));
  const auto empty = dir.write("empty.txt", "");
  message = input_error_of([&] { runtime::load_tokens(data_of("text", empty), transformer(18, 8), io::Split::train); });
  CHECK(contains(message, fmt::format("data.path '{}' is empty", empty)));
  const auto missing = (dir.path / "missing.txt").string();
  message =
      input_error_of([&] { runtime::load_tokens(data_of("text", missing), transformer(18, 8), io::Split::train); });
  CHECK(contains(message, fmt::format("cannot open data.path '{}': no such file", missing)));
  const auto latin1 = dir.write("latin1.txt", "caf\xe9\n");
  message = input_error_of([&] { runtime::load_tokens(data_of("text", latin1), transformer(5, 2), io::Split::train); });
  CHECK(contains(message, fmt::format("data.path '{}' is not a UTF-8 text file (byte 0xe9 at offset 3)", latin1)));
}

TEST_CASE("hdf5 source: a token-stream file's splits and vocabulary", "[runtime][tokens]") {
  const TempDir dir;
  const auto path = (dir.path / "tokens.h5").string();
  std::vector<std::int32_t> train(50), test(20);
  for (int i = 0; i < 50; ++i) train[i] = i % 5;
  for (int i = 0; i < 20; ++i) test[i] = 4 - i % 5;
  write_token_file(path, "ab c\xc3\xa9", train, test);
  const auto data = data_of("hdf5", path);
  const auto spec = transformer(5, 6);
  CHECK(*runtime::load_tokens(data, spec, io::Split::train) == train);
  CHECK(*runtime::load_tokens(data, spec, io::Split::test) == test);
  const auto tokenizer = runtime::load_tokenizer(data, spec.model.vocab);
  const auto& vocabulary = dynamic_cast<const model::Vocabulary&>(*tokenizer);
  CHECK(vocabulary.symbols() == std::vector<char32_t>{U'a', U'b', U' ', U'c', U'\u00e9'});
  tensor::ExecContext exec;
  const auto source = runtime::make_data_source<double>(data, spec, io::Split::test, exec);
  CHECK(source->samples() == (20 - 1) / 6);
  const auto X = tensor::uninitialized_matrix<double>("test::X", 1, 6);
  source->fill_inputs(0, 1, X);  // window 1: test tokens 6..11
  CHECK(tensor::to_host<double>(X) == std::vector<double>{test.begin() + 6, test.begin() + 12});
}

TEST_CASE("hdf5 source: input errors name the object and the fix", "[runtime][tokens]") {
  const TempDir dir;
  const auto path = (dir.path / "x.h5").string();
  const auto data = data_of("hdf5", path);
  const std::vector<std::int32_t> ok(30, 1);
  write_token_file(path, "abc", ok, ok);
  auto message = input_error_of([&] { runtime::load_tokens(data, transformer(80, 4), io::Split::train); });
  CHECK(contains(message, "model.vocab = 80 but data.path"));
  CHECK(contains(message, "has a vocabulary of 3 symbols; set model.vocab = 3"));
  message = input_error_of([&] { runtime::load_tokens(data, transformer(3, 30), io::Split::test); });
  CHECK(contains(message, "model.context = 30 needs at least 31 tokens, but the validation split"));
  auto bad = ok;
  bad[7] = 3;
  write_token_file(path, "abc", bad, ok);
  message = input_error_of([&] { runtime::load_tokens(data, transformer(3, 4), io::Split::train); });
  CHECK(contains(message, "/train/tokens[7] = 3 is outside the vocabulary's [0, 3)"));
  write_token_file(path, "abc", ok, ok, io::hdf5::Type::float32);
  message = input_error_of([&] { runtime::load_tokens(data, transformer(3, 4), io::Split::train); });
  CHECK(contains(message, "/test/tokens is 1-D float32; it must be 1-D int32 token ids"));
  {
    auto file = io::hdf5::File::create(path, io::hdf5::File::Exists::truncate);
    file.set_attribute("format", io::DatasetFile::format_name);
    file.set_attribute("vocabulary", "abc");
    file.create_group("train").write("tokens", ok);
  }
  message = input_error_of([&] { runtime::load_tokens(data, transformer(3, 4), io::Split::train); });
  CHECK(contains(message, "has no group /test"));
  {
    auto file = io::hdf5::File::create(path, io::hdf5::File::Exists::truncate);
    file.set_attribute("format", io::DatasetFile::format_name);
    file.create_group("train").write("tokens", ok);
    file.create_group("test").write("tokens", ok);
  }
  message = input_error_of([&] { runtime::load_tokens(data, transformer(3, 4), io::Split::train); });
  CHECK(contains(message, "has no root attribute vocabulary"));
  const auto text = dir.write("plain.txt", "abc");
  message = input_error_of([&] { runtime::load_tokens(data_of("hdf5", text), transformer(3, 4), io::Split::train); });
  CHECK(contains(message, "is not an HDF5 file"));
  CHECK(contains(message, "data.source = \"text\""));
}

TEST_CASE("synthetic source: a seeded Markov stream over model.vocab symbols", "[runtime][tokens]") {
  const auto data = data_of("synthetic", "");
  const auto spec = transformer(12, 16);
  const auto train = runtime::load_tokens(data, spec, io::Split::train);
  const auto test = runtime::load_tokens(data, spec, io::Split::test);
  CHECK(train->size() == 1 << 16);
  CHECK(test->size() == 1 << 13);
  CHECK(*train == *runtime::load_tokens(data, spec, io::Split::train));
  CHECK(*std::max_element(train->begin(), train->end()) == 11);
  const auto tokenizer = runtime::load_tokenizer(data, spec.model.vocab);
  const auto& vocabulary = dynamic_cast<const model::Vocabulary&>(*tokenizer);
  CHECK(vocabulary.utf8() == " !\"#$%&'()*+");
  CHECK(runtime::synthetic_vocabulary(96).symbols().back() == U'\u00a1');
  CHECK(runtime::synthetic_vocabulary(95 + 13).symbols().back() == U'\u00ae');  // past the soft hyphen
  // A long context still finds enough tokens.
  CHECK(runtime::load_tokens(data, transformer(12, 8192), io::Split::test)->size() == 4 * 8193);
}

TEST_CASE("a SentencePiece model tokenizes the text source: the same 90/10 split of the characters, exactly decoded",
          "[runtime][tokens]") {
  const std::string lm = std::string(KPIPE_SOURCE_DIR) + "/tests/data/lm/";
  config::DataConfig data = data_of("text", lm + "genesis.txt");
  data.tokenizer = config::TokenizerKind::sentencepiece;
  data.tokenizer_model = lm + "genesis-bpe.model";  // 384 pieces (tests/data/lm/genesis-bpe.toml)
  if (!KPIPE_HAVE_SENTENCEPIECE) {
    CHECK(contains(input_error_of([&] { runtime::load_tokenizer(data, 384); }), "built with SentencePiece"));
    return;
  }
  const auto spec = transformer(384, 16);
  const auto tokenizer = runtime::load_tokenizer(data, 384);
  CHECK(tokenizer->size() == 384);
  std::ifstream file(data.path, std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  const std::size_t characters = model::decode_utf8(text).size();
  const std::size_t middle = characters * 9 / 10;

  // Each split decodes to exactly its characters, split where the character model splits.
  const auto train = runtime::load_tokens(data, spec, io::Split::train);
  const auto test = runtime::load_tokens(data, spec, io::Split::test);
  const std::string train_text = tokenizer->decode(*train);
  CHECK(model::decode_utf8(train_text).size() == middle);
  CHECK(train_text + tokenizer->decode(*test) == text);
  // Subwords: fewer tokens than characters, and bits per character scale by their ratio.
  CHECK(train->size() < middle);
  CHECK(runtime::characters_per_token(data, spec) ==
        Approx(static_cast<double>(characters - middle) / static_cast<double>(test->size())));
  CHECK(runtime::characters_per_token(data_of("text", data.path), transformer(43, 16)) == 1.0);
  // A prompt round-trips, spaces and newlines included (byte fallback, identity normalisation).
  const std::string prompt = "In the beginning God\ncreated  the heaven";
  CHECK(tokenizer->decode(tokenizer->encode(prompt)) == prompt);

  // Every bad input names what to change.
  CHECK(contains(input_error_of([&] { runtime::load_tokenizer(data, 400); }), "set model.vocab = 384"));
  CHECK(contains(input_error_of([&] { (void)tokenizer->decode({384}); }), "outside the 384 pieces"));
  config::DataConfig missing = data;
  missing.tokenizer_model = lm + "no-such.model";
  CHECK(contains(input_error_of([&] { runtime::load_tokenizer(missing, 384); }), "no such file"));
  config::DataConfig corrupt = data;
  corrupt.tokenizer_model = lm + "genesis.txt";
  CHECK(contains(input_error_of([&] { runtime::load_tokenizer(corrupt, 384); }), "is no SentencePiece model"));
}

TEST_CASE("a character map kpipe's checks pass is one the SentencePiece library applies", "[runtime][tokens]") {
  // fold-a.model is genesis-bpe.model with a hand-built normaliser that folds
  // "A" to "a" (tests/data/sentencepiece/make.py): the walk over its trie
  // accepts it, and the library, given it afterwards, applies the rule.
  if (!KPIPE_HAVE_SENTENCEPIECE) return;
  const std::string root = std::string(KPIPE_SOURCE_DIR) + "/tests/data/";
  config::DataConfig data = data_of("text", root + "lm/genesis.txt");
  data.tokenizer = config::TokenizerKind::sentencepiece;
  data.tokenizer_model = root + "lm/genesis-bpe.model";
  const auto plain = runtime::load_tokenizer(data, 384);
  data.tokenizer_model = root + "sentencepiece/fold-a.model";
  const auto folding = runtime::load_tokenizer(data, 384);
  CHECK(folding->encode("And Abraham") == plain->encode("and abraham"));
  CHECK(plain->encode("And Abraham") != plain->encode("and abraham"));
  CHECK(folding->encode("in the beginning") == plain->encode("in the beginning"));

  // The same map with its root one block past the trie's end is refused
  // before the library sees it (the library reads past the map).
  data.tokenizer_model = root + "sentencepiece/charsmap-root-one-block-past-end.model";
  CHECK(contains(input_error_of([&] { runtime::load_tokenizer(data, 384); }),
                 "its normaliser's character map is damaged (a state's units [768, 1023] lie past its 768 units)"));
}
