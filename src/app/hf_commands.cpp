// `kpipe export CHECKPOINT DIR` and `kpipe import DIR CHECKPOINT_DIR`: a
// language model's checkpoint as Hugging Face's (config.json and
// model.safetensors, which transformers' GPT2LMHeadModel or
// LlamaForCausalLM.from_pretrained loads), and back into a kpipe checkpoint
// any layout restarts from (runtime/interop/hf_format.hpp, docs/formats.md).
#include <fmt/format.h>

#include <filesystem>

#include "commands.hpp"
#include "kpipe/comm/collectives.hpp"
#include "kpipe/config/from_deck.hpp"
#include "kpipe/core/error.hpp"
#include "kpipe/core/log.hpp"
#include "kpipe/core/output_file.hpp"
#include "kpipe/core/strings.hpp"
#include "kpipe/runtime/interop/hf_format.hpp"

namespace kpipe::app {

namespace {

void require_one_process(const char* command) {
  if (comm::size_of(comm::world()) != 1) {
    throw input_error(fmt::format("kpipe {} converts files on one process; run it without mpirun or srun", command));
  }
}

double mib(std::int64_t floats) { return static_cast<double>(floats) * sizeof(float) / (1 << 20); }

// The deck of an imported model: its model keys, the checkpoint to start
// from (a TOML string, whatever the path holds; the comment's path printable).
std::string imported_deck(const runtime::hf::Imported& imported, const std::string& source,
                          const std::string& checkpoint) {
  return fmt::format(
      "# {} weights imported by `kpipe import {}`; add the data and training keys\n"
      "# (or pass them as key=value) and run `kpipe infer` or `kpipe run` with it.\n"
      "{}checkpoint.restart = {}\n",
      imported.format->name, printable(source), imported.format->deck_keys(imported.model),
      config::to_toml(config::Value{checkpoint}));
}

// "2 layers, width 16, 2 heads, vocabulary 43, context 16"
std::string shape_of(const config::ModelConfig& m) {
  return fmt::format("{} layers, width {}, {} heads, vocabulary {}, context {}{}", m.blocks, m.dim, m.heads, m.vocab,
                     m.context, m.tie_embeddings ? ", head tied to the embedding" : "");
}

}  // namespace

int export_command(const runtime::Environment&, const ExportOptions& options) {
  require_one_process("export");
  const std::string& file = options.checkpoint;
  protect_input(file);  // the outputs never replace it
  const config::ModelConfig model =
      config::run_config(
          config::parse_deck(runtime::hf::checkpoint_deck(file), fmt::format("the deck attribute of {}", file)))
          .model;
  const auto exported = runtime::hf::export_checkpoint(file, model, options.directory);
  log::info("export: step {} of {} as {} ({}): model.safetensors ({:.3g} MiB) and config.json in {}", exported.step,
            file, runtime::hf::format_of_family(model.kind).name, shape_of(model), mib(exported.floats),
            options.directory);
  return 0;
}

int import_command(const runtime::Environment&, const ImportOptions& options) {
  require_one_process("import");
  const std::string deck_path = (std::filesystem::path(options.checkpoint_directory) / "model.toml").string();
  // An unwritable model.toml is refused before anything is read or written
  // (a missing CHECKPOINT_DIR is made below).
  if (std::filesystem::exists(options.checkpoint_directory)) require_writable(deck_path, "kpipe import's model.toml");
  const runtime::hf::Imported imported = runtime::hf::read_directory(options.directory);
  const std::string checkpoint = (std::filesystem::path(options.checkpoint_directory) / "step-0.h5").string();
  const std::string deck_text = imported_deck(imported, options.directory, checkpoint);
  const config::Deck deck = config::parse_deck(deck_text, deck_path);
  runtime::hf::write_imported(imported, config::run_config(deck), deck.resolved_toml(), options.checkpoint_directory);
  write_output(deck_path, "model.toml", [&](std::ostream& out) { out << deck_text; });
  std::int64_t floats = 0;
  for (const auto& [name, tensor] : imported.parameters) floats += tensor.elements();
  log::info("import: {} of {} ({}) as {} ({:.3g} MiB of weights); its model keys are in {}", imported.format->name,
            options.directory, shape_of(imported.model), checkpoint, mib(floats), deck_path);
  return 0;
}

}  // namespace kpipe::app
