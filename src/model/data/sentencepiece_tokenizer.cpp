// data.tokenizer = "sentencepiece": the subword tokens of a SentencePiece
// model file (BPE or unigram; examples/lm/prepare_bpe.sh trains one).
#include <fmt/format.h>

#include "kpipe/core/error.hpp"
#include "kpipe/core/input_file.hpp"
#include "kpipe/core/limits.hpp"
#include "kpipe/core/strings.hpp"
#include "kpipe/model/data/tokenizer.hpp"

#if KPIPE_HAVE_SENTENCEPIECE
#include <sentencepiece_processor.h>
#endif

namespace kpipe::model {

#if KPIPE_HAVE_SENTENCEPIECE
namespace {

constexpr const char* train_one = "train one with examples/lm/prepare_bpe.sh";

class SentencePieceTokenizer final : public Tokenizer {
 public:
  explicit SentencePieceTokenizer(const std::string& path) : path_(printable(path)) {
    // Read and bounded as every input file is, then parsed from memory: the
    // library is never handed a FIFO or a device.
    const std::string bytes = read_input_bytes(
        path, {"data.tokenizer_model", limits::tokenizer_model_bytes, "; set data.tokenizer_model to a .model file"});
    if (const auto status = processor_.LoadFromSerializedProto(bytes); !status.ok()) {
      throw input_error(fmt::format("data.tokenizer_model '{}' is no SentencePiece model ({}); {}", path_,
                                    printable(status.ToString()), train_one));
    }
  }

  int size() const override { return processor_.GetPieceSize(); }

  std::vector<std::int32_t> encode(std::string_view utf8, std::string_view what) const override {
    std::vector<int> ids;
    if (const auto status = processor_.Encode(absl::string_view(utf8.data(), utf8.size()), &ids); !status.ok()) {
      throw input_error(fmt::format("cannot encode {} with the SentencePiece model '{}': {}", what, path_,
                                    printable(status.ToString())));
    }
    return {ids.begin(), ids.end()};
  }

  std::string decode(const std::int32_t* ids, std::size_t count) const override {
    std::vector<int> pieces(ids, ids + count);
    for (std::size_t i = 0; i < count; ++i) {
      if (pieces[i] < 0 || pieces[i] >= size()) {
        throw input_error(
            fmt::format("token {} of {} is id {}, outside the {} pieces of '{}'; decode with the "
                        "tokenizer the model was trained on",
                        i, count, pieces[i], size(), path_));
      }
    }
    std::string text;
    if (const auto status = processor_.Decode(pieces, &text); !status.ok()) {
      throw input_error(fmt::format("cannot decode {} tokens with the SentencePiece model '{}': {}", count, path_,
                                    printable(status.ToString())));
    }
    return text;
  }

  std::string description() const override {
    return fmt::format("the SentencePiece model '{}' of {} pieces", path_, size());
  }

 private:
  std::string path_;
  sentencepiece::SentencePieceProcessor processor_;
};

}  // namespace

std::unique_ptr<Tokenizer> load_sentencepiece(const std::string& path) {
  return std::make_unique<SentencePieceTokenizer>(path);
}
#else
std::unique_ptr<Tokenizer> load_sentencepiece(const std::string&) {
  throw input_error(
      "data.tokenizer = \"sentencepiece\" needs a kpipe built with SentencePiece; install libsentencepiece-dev "
      "(Debian) and rebuild, or use data.tokenizer = \"char\"");
}
#endif

}  // namespace kpipe::model
