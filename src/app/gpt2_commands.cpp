// `kpipe export CHECKPOINT DIR` and `kpipe import DIR CHECKPOINT_DIR`: a
// transformer checkpoint as Hugging Face GPT-2 (config.json and
// model.safetensors, which transformers' GPT2LMHeadModel.from_pretrained
// loads), and back into a kpipe checkpoint any layout restarts from
// (runtime/gpt2_format.hpp, docs/formats.md).
#include <fmt/format.h>

#include <filesystem>

#include "commands.hpp"
#include "kpipe/comm/collectives.hpp"
#include "kpipe/config/from_deck.hpp"
#include "kpipe/core/error.hpp"
#include "kpipe/core/log.hpp"
#include "kpipe/core/output_file.hpp"
#include "kpipe/runtime/gpt2_format.hpp"

namespace kpipe::app {

namespace {

void require_one_process(const char* command) {
  if (comm::size_of(comm::world()) != 1) {
    throw input_error(fmt::format("kpipe {} converts files on one process; run it without mpirun or srun", command));
  }
}

double mib(std::int64_t floats) { return static_cast<double>(floats) * sizeof(float) / (1 << 20); }

// The deck of an imported model: its model keys, the checkpoint to start from.
std::string imported_deck(const config::ModelConfig& m, const std::string& source, const std::string& checkpoint) {
  return fmt::format(
      "# GPT-2 weights imported by `kpipe import {}`; add the data and training keys\n"
      "# (or pass them as key=value) and run `kpipe infer` or `kpipe run` with it.\n"
      "model.kind = \"transformer\"\n"
      "model.vocab = {}\nmodel.context = {}\nmodel.dim = {}\nmodel.heads = {}\nmodel.layers = {}\n"
      "model.mlp_ratio = {}\nmodel.activation = \"{}\"\nmodel.head_bias = false\nmodel.tie_embeddings = {}\n"
      "checkpoint.restart = \"{}\"\n",
      source, m.vocab, m.context, m.dim, m.heads, m.blocks, m.mlp_ratio, config::name_of(m.activation),
      m.tie_embeddings, checkpoint);
}

}  // namespace

int export_command(const runtime::Environment&, const ExportOptions& options) {
  require_one_process("export");
  const std::string& file = options.checkpoint;
  const config::ModelConfig model =
      config::run_config(
          config::parse_deck(runtime::gpt2::checkpoint_deck(file), fmt::format("the deck attribute of {}", file)))
          .model;
  const auto exported = runtime::gpt2::export_checkpoint(file, model, options.directory);
  log::info(
      "export: step {} of {} as GPT-2 ({} layers, width {}, {} heads, vocabulary {}, context {}, {}{}): "
      "model.safetensors ({:.3g} MiB) and config.json in {}",
      exported.step, file, model.blocks, model.dim, model.heads, model.vocab, model.context,
      config::name_of(model.activation), model.tie_embeddings ? ", tied head" : "", mib(exported.floats),
      options.directory);
  return 0;
}

int import_command(const runtime::Environment&, const ImportOptions& options) {
  require_one_process("import");
  const runtime::gpt2::Imported imported = runtime::gpt2::read_directory(options.directory);
  const std::string deck_path = (std::filesystem::path(options.checkpoint_directory) / "model.toml").string();
  const std::string checkpoint = (std::filesystem::path(options.checkpoint_directory) / "step-0.h5").string();
  const std::string deck_text = imported_deck(imported.model, options.directory, checkpoint);
  const config::Deck deck = config::parse_deck(deck_text, deck_path);
  runtime::gpt2::write_imported(imported, config::run_config(deck), deck.resolved_toml(), options.checkpoint_directory);
  write_output(deck_path, "model.toml", [&](std::ostream& out) { out << deck_text; });
  std::int64_t floats = 0;
  for (const auto& [name, tensor] : imported.parameters) floats += tensor.elements();
  const config::ModelConfig& m = imported.model;
  log::info(
      "import: GPT-2 of {} ({} layers, width {}, {} heads, vocabulary {}, context {}, {}{}) as {} ({:.3g} MiB of "
      "weights); its model keys are in {}",
      options.directory, m.blocks, m.dim, m.heads, m.vocab, m.context, config::name_of(m.activation),
      m.tie_embeddings ? ", head tied to the embedding" : "", checkpoint, mib(floats), deck_path);
  return 0;
}

}  // namespace kpipe::app
