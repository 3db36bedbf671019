#pragma once
// The kpipe subcommands (DESIGN.md §7). main.cpp parses the command line into
// these option structs; each command returns the process exit code.

#include <string>
#include <vector>

#include "kpipe/config/deck.hpp"
#include "kpipe/config/run_config.hpp"
#include "kpipe/runtime/environment.hpp"
#include "kpipe/runtime/serving/generation.hpp"

namespace kpipe::app {

struct DeckArguments {
  std::string path;
  std::vector<std::string> overrides;  // key=value
};

struct LoadedDeck {
  config::Deck deck;
  config::RunConfig config;  // the deck as typed structs, checked once
};

// Read on rank 0, broadcast, parse, validate; warnings are printed once.
LoadedDeck load_deck(const DeckArguments& arguments);

struct DeckOptions {
  DeckArguments deck;
  bool doc = false;       // print the schema reference instead of checking a deck
  bool resolved = false;  // also print every key with its resolved value
};
int deck_command(const runtime::Environment& env, const DeckOptions& options);

struct PlanOptions {
  DeckArguments deck;
  std::string svg_path;
  std::string trace_path;
  std::string json_path;
  std::string costs_path;     // --costs: measured costs (run --json, sweep --json or a --profile file)
  bool ascii = true;          // the ASCII timeline, when it fits the terminal
  std::string requests_path;  // requests=FILE: a serving plan of this trace instead of a training step
};
int plan_command(const runtime::Environment& env, PlanOptions options);
// The serving plan of plan_command with requests=FILE (serve_plan.cpp).
int serve_plan_command(const LoadedDeck& loaded, const PlanOptions& options);
// Takes `requests=FILE` out of the key=value arguments; empty when absent.
std::string take_requests_argument(DeckArguments& arguments);

struct RunOptions {
  DeckArguments deck;
  std::string json_path;
  std::string profile_path;  // --profile: every executed action to HDF5 (docs/formats.md, "Profile")
};
int run_command(const runtime::Environment& env, const RunOptions& options);
int infer_command(const runtime::Environment& env, const RunOptions& options);

struct SweepOptions {
  DeckArguments deck;
  std::string sizes;  // --sizes as written, "4,8,16"; empty: every b dividing B/d
  int steps = 10;     // measured steps per size, after one warm-up step
  std::string json_path;
};
int sweep_command(const runtime::Environment& env, const SweepOptions& options);

struct TuneOptions {
  DeckArguments deck;
  int steps = 10;          // measured steps per candidate (and per calibration size), after one warm-up step
  int top = 3;             // how many of the best predictions are measured
  std::string costs_path;  // --costs: measured costs of the deck instead of calibrating it
  std::string json_path;
};
int tune_command(const runtime::Environment& env, const TuneOptions& options);

struct GenerateOptions {
  DeckArguments deck;                 // without the sampling keys below
  std::string prompt;                 // prompt=TEXT
  runtime::SamplingOptions sampling;  // tokens=N temperature=T seed=S
};
// The generate command's own keys (prompt, tokens, temperature, seed) out of
// the key=value arguments; dotted keys stay deck overrides.
GenerateOptions split_generate_arguments(DeckArguments arguments);
int generate_command(const runtime::Environment& env, const GenerateOptions& options);

struct ServeOptions {
  DeckArguments deck;         // without requests=
  std::string requests_path;  // requests=FILE: the JSON-lines trace
  std::string json_path;
  std::string svg_path;  // measured timeline above the simulated one
};
// The serve command's own key (requests=FILE, required) out of the key=value arguments.
ServeOptions split_serve_arguments(DeckArguments arguments);
int serve_command(const runtime::Environment& env, const ServeOptions& options);

struct TraceOptions {
  std::string profile_path;
  std::string json_path;  // Chrome-trace JSON (Perfetto)
  std::string svg_path;   // one step measured, above its simulation with the measured costs
  int step = -1;          // the step the SVG draws; -1: the last
};
int trace_command(const runtime::Environment& env, const TraceOptions& options);

// Language models in Hugging Face's format (hf_commands.cpp, docs/formats.md).
struct ExportOptions {
  std::string checkpoint;  // a language model's checkpoint of kpipe run
  std::string directory;   // gets config.json and model.safetensors
};
int export_command(const runtime::Environment& env, const ExportOptions& options);

struct ImportOptions {
  std::string directory;             // config.json and model.safetensors (save_pretrained)
  std::string checkpoint_directory;  // gets step-0.h5 and model.toml
};
int import_command(const runtime::Environment& env, const ImportOptions& options);

}  // namespace kpipe::app
