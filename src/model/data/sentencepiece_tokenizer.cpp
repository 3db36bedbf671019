// data.tokenizer = "sentencepiece": the subword tokens of a SentencePiece
// model file (BPE or unigram; examples/lm/prepare_bpe.sh trains one).
#include <fmt/format.h>

#include <mutex>

#include "kpipe/core/error.hpp"
#include "kpipe/core/input_file.hpp"
#include "kpipe/core/isolated.hpp"
#include "kpipe/core/limits.hpp"
#include "kpipe/core/log.hpp"
#include "kpipe/core/strings.hpp"
#include "kpipe/model/data/tokenizer.hpp"
#include "sentencepiece_model.hpp"

#if KPIPE_HAVE_SENTENCEPIECE
#include <sentencepiece_processor.h>
#endif

namespace kpipe::model {

#if KPIPE_HAVE_SENTENCEPIECE
namespace {

using detail::train_one;

// Text that takes the library through its normaliser, model and decoder:
// ASCII, multi-byte UTF-8 and a byte that is not UTF-8.
constexpr std::string_view rehearsal_text =
    " The quick brown fox\tjumps over 13 lazy dogs.\n\u00e9\u00df\u20ac\u2581\U0001F600 \xff!";

constexpr double rehearsal_seconds = 30;

// Loads `bytes` and encodes and decodes with them in a child process: the
// library crashing on a file the checks let through ends the child only.
void rehearse(const std::string& bytes, const std::string& where) {
  const IsolatedOutcome outcome = run_isolated(
      [&] {
        sentencepiece::SentencePieceProcessor processor;
        if (!processor.LoadFromSerializedProto(bytes).ok()) return;  // the rank reports the status
        std::vector<int> ids;
        std::string text;
        (void)processor.Encode(absl::string_view(rehearsal_text.data(), rehearsal_text.size()), &ids);
        (void)processor.Decode(ids, &text);
        ids.resize(static_cast<std::size_t>(processor.GetPieceSize()));
        for (std::size_t id = 0; id < ids.size(); ++id) ids[id] = static_cast<int>(id);
        (void)processor.Decode(ids, &text);
      },
      rehearsal_seconds);
  switch (outcome.end) {
    case IsolatedOutcome::End::crashed:
    case IsolatedOutcome::End::failed:  // the library threw (darts-clone does) rather than return a status
      throw input_error(fmt::format("{}: the SentencePiece library {} on it in a rehearsal ({}); {}", where,
                                    outcome.end == IsolatedOutcome::End::crashed ? "crashed" : "failed",
                                    printable(outcome.message), train_one));
    case IsolatedOutcome::End::timed_out:
      throw input_error(fmt::format("{}: the SentencePiece library did not finish a rehearsal on it within {} s; {}",
                                    where, rehearsal_seconds, train_one));
    case IsolatedOutcome::End::not_run:
      log::warning("cannot rehearse {} in a child process ({}); loading it unrehearsed", where, outcome.message);
      return;
    case IsolatedOutcome::End::finished:
    case IsolatedOutcome::End::refused:
      return;
  }
}

// Runs `check` on `bytes` unless they are the model that last passed it in
// this process: the text source loads the tokenizer once per split, and each
// load would walk the character maps and fork a rehearsal again.
template <class Check>
void check_once(const std::string& bytes, Check&& check) {
  static std::mutex mutex;
  static std::string passed;
  {
    const std::lock_guard<std::mutex> lock(mutex);
    if (!passed.empty() && passed == bytes) return;
  }
  check();
  const std::lock_guard<std::mutex> lock(mutex);
  passed = bytes;
}

class SentencePieceTokenizer final : public Tokenizer {
 public:
  explicit SentencePieceTokenizer(const std::string& path) : path_(printable(path)) {
    // Read and bounded as every input file is, then parsed from memory: the
    // library is never handed a FIFO or a device, nor a file its checks and
    // rehearsal did not pass.
    const std::string bytes = read_input_bytes(
        path, {"data.tokenizer_model", limits::tokenizer_model_bytes, "; set data.tokenizer_model to a .model file"});
    const std::string where = fmt::format("data.tokenizer_model '{}'", path_);
    check_once(bytes, [&] {
      detail::check_sentencepiece_model(bytes, where);
      rehearse(bytes, where);
    });
    if (const auto status = processor_.LoadFromSerializedProto(bytes); !status.ok()) {
      throw input_error(
          fmt::format("{} is no SentencePiece model ({}); {}", where, printable(status.ToString()), train_one));
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
