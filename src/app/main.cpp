// The kpipe command line (DESIGN.md §7). Exit codes: 0 success, 2 bad input
// (deck, command line, data file), 1 runtime failure. Every error is one line
// on stderr, printed once by rank 0, and MPI and Kokkos are finalised on
// every path.

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "commands.hpp"
#include "kpipe/app/main.hpp"
#include "kpipe/core/error.hpp"
#include "kpipe/core/log.hpp"
#include "kpipe/core/strings.hpp"
#include "kpipe/core/version.hpp"
#include "kpipe/runtime/environment.hpp"

// Inside kpipe::app rather than `using namespace kpipe`: nvcc's generated code
// calls an unqualified log(), which kpipe::log would make ambiguous.
namespace kpipe::app {
namespace {

void report(const char* message) {
  if (log::is_root()) std::fprintf(stderr, "kpipe: error: %s\n", bounded_line(message).c_str());
}

// Kokkos consumes its own --kokkos-* flags; the CLI must not see them.
std::vector<std::string> without_kokkos_flags(int argc, char** argv) {
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("--kokkos-", 0) != 0) args.push_back(arg);
  }
  return args;
}

void add_deck_arguments(CLI::App& command, app::DeckArguments& deck, bool required = true) {
  command.add_option("DECK", deck.path, "Input deck (TOML)")->required(required);
  command.add_option("overrides", deck.overrides, "Deck overrides, key=value (e.g. pipeline.schedule=gpipe)");
}

// CLI11 answers a mistyped command with "A subcommand is required"; name it
// and the choices instead. A first argument that is neither an option nor a
// command is that mistake.
void check_command(const CLI::App& cli, const std::vector<std::string>& args) {
  std::vector<std::string> names;
  for (const CLI::App* command : cli.get_subcommands([](const CLI::App*) { return true; })) {
    names.push_back(command->get_name());
  }
  const std::string choose = "choose " + join_choices(names) + " (kpipe --help describes them)";
  if (args.empty()) throw input_error("no command given; " + choose);
  const std::string& first = args.front();
  if (first.rfind('-', 0) == 0 || std::find(names.begin(), names.end(), first) != names.end()) return;
  const std::string near = nearest_match(first, names);
  throw input_error(fmt::format("unknown command '{}'{}; {}", first,
                                near.empty() ? "" : fmt::format(" (did you mean '{}'?)", near), choose));
}

int run_cli(const runtime::Environment& env, std::vector<std::string> args) {
  CLI::App cli{"kpipe: pipeline-parallel training and inference of layered models with Kokkos and MPI", "kpipe"};
  cli.set_version_flag("--version", std::string("kpipe ") + version_string);
  cli.require_subcommand(1);

  app::DeckOptions deck_options;
  auto* deck = cli.add_subcommand("deck", "Check a deck, or print every key with its doc (--doc)");
  add_deck_arguments(*deck, deck_options.deck, false);
  deck->add_flag("--doc", deck_options.doc, "Print the deck reference (Markdown)");
  deck->add_flag("--resolved", deck_options.resolved, "Also print every key with its resolved value");

  app::PlanOptions plan_options;
  auto* plan = cli.add_subcommand(
      "plan", "Schedule, validate and simulate a deck without computing (requests=FILE: simulate serving that trace)");
  add_deck_arguments(*plan, plan_options.deck);
  plan->add_option("--svg", plan_options.svg_path, "Write an SVG timeline");
  plan->add_option("--trace", plan_options.trace_path, "Write a Chrome-trace JSON timeline (Perfetto)");
  plan->add_option("--json", plan_options.json_path, "Write the summary as JSON");
  plan->add_option("--costs", plan_options.costs_path,
                   "Also predict the step in seconds from measured costs: a 'run --json' or 'sweep --json' file, or a "
                   "'run --profile' HDF5 file; with requests=FILE, a 'serve --json' file");
  plan->add_flag("!--no-ascii", plan_options.ascii, "Do not print the ASCII timeline");

  app::RunOptions run_options;
  auto* run = cli.add_subcommand("run", "Train under mpirun/srun; world size must equal p * d");
  add_deck_arguments(*run, run_options.deck);
  run->add_option("--json", run_options.json_path, "Write the summary as JSON");
  run->add_option("--profile", run_options.profile_path, "Write every executed action of every step to HDF5");
  auto* infer = cli.add_subcommand("infer", "Forward-only pipelined evaluation");
  add_deck_arguments(*infer, run_options.deck);
  infer->add_option("--json", run_options.json_path, "Write the summary as JSON");
  infer->add_option("--profile", run_options.profile_path, "Write every executed action of every step to HDF5");

  app::DeckArguments generate_deck;
  auto* generate = cli.add_subcommand(
      "generate", "Sample text from a transformer deck: prompt=TEXT tokens=N temperature=T seed=S (and key=value)");
  add_deck_arguments(*generate, generate_deck);

  app::DeckArguments serve_deck;
  std::string serve_json, serve_svg;
  auto* serve = cli.add_subcommand(
      "serve", "Replay a request trace through the pipelined transformer: requests=FILE (and key=value)");
  add_deck_arguments(*serve, serve_deck);
  serve->add_option("--json", serve_json, "Write the summary and every request's tokens as JSON");
  serve->add_option("--svg", serve_svg, "Write the measured timeline above the simulated one (SVG)");

  app::SweepOptions sweep_options;
  auto* sweep = cli.add_subcommand("sweep", "Measure throughput over microbatch sizes and recommend one");
  add_deck_arguments(*sweep, sweep_options.deck);
  sweep->add_option("--sizes", sweep_options.sizes, "Microbatch sizes, e.g. 4,8,16 (default: every b dividing B/d)");
  sweep->add_option("--steps", sweep_options.steps, "Measured steps per size, after one warm-up step")
      ->check(CLI::Range(1, 10000));
  sweep->add_option("--json", sweep_options.json_path, "Write the table, the fit and the recommendation as JSON");
  app::TuneOptions tune_options;
  auto* tune = cli.add_subcommand(
      "tune", "Search schedule, v, b, recomputation and partition with the calibrated simulator; measure the best");
  add_deck_arguments(*tune, tune_options.deck);
  tune->add_option("--steps", tune_options.steps, "Measured steps per candidate, after one warm-up step")
      ->check(CLI::Range(1, 10000));
  tune->add_option("--top", tune_options.top, "How many of the best predicted candidates to measure")
      ->check(CLI::Range(1, 100));
  tune->add_option("--costs", tune_options.costs_path,
                   "Measured costs of this deck ('run --json', 'sweep --json' or 'run --profile') instead of "
                   "calibrating it");
  tune->add_option("--json", tune_options.json_path, "Write every candidate, the measured ones and the winner as JSON");
  app::TraceOptions trace_options;
  auto* trace = cli.add_subcommand("trace", "Export a profile to Chrome-trace JSON and an SVG timeline");
  trace->add_option("PROFILE", trace_options.profile_path, "Profile file (HDF5) of 'kpipe run --profile'")->required();
  trace->add_option("--json", trace_options.json_path, "Write a Chrome-trace JSON of every action (Perfetto)");
  trace->add_option("--svg", trace_options.svg_path, "Write an SVG of one step, measured above simulated");
  trace->add_option("--step", trace_options.step, "The step the SVG draws (default: the last)")
      ->check(CLI::Range(0, std::numeric_limits<int>::max()));

  app::ExportOptions export_options;
  auto* export_model = cli.add_subcommand(
      "export",
      "Write a transformer or llama checkpoint as Hugging Face GPT-2 or Llama (config.json, model.safetensors)");
  export_model->add_option("CHECKPOINT", export_options.checkpoint, "A transformer or llama checkpoint (step-<N>.h5)")
      ->required();
  export_model->add_option("DIR", export_options.directory, "Directory for config.json and model.safetensors")
      ->required();
  app::ImportOptions import_options;
  auto* import_model = cli.add_subcommand(
      "import", "Read a Hugging Face GPT-2 or Llama directory into a kpipe checkpoint (step-0.h5) and its model keys");
  import_model
      ->add_option("DIR", import_options.directory,
                   "Directory holding config.json and model.safetensors (or its shards and their index)")
      ->required();
  import_model
      ->add_option("CHECKPOINT_DIR", import_options.checkpoint_directory, "Directory for step-0.h5 and model.toml")
      ->required();

  check_command(cli, args);
  try {
    std::reverse(args.begin(), args.end());  // CLI11 takes the arguments reversed
    cli.parse(args);
  } catch (const CLI::CallForHelp& e) {
    return log::is_root() ? cli.exit(e) : 0;
  } catch (const CLI::CallForVersion& e) {
    return log::is_root() ? cli.exit(e) : 0;
  } catch (const CLI::ParseError& e) {
    throw input_error(fmt::format("{}; run 'kpipe --help' for usage", e.what()));
  }

  if (*deck) return app::deck_command(env, deck_options);
  log::info("kpipe {} | {}", version_string, env.describe());
  if (*plan) return app::plan_command(env, plan_options);
  if (*run) return app::run_command(env, run_options);
  if (*infer) return app::infer_command(env, run_options);
  if (*trace) return app::trace_command(env, trace_options);
  if (*export_model) return app::export_command(env, export_options);
  if (*import_model) return app::import_command(env, import_options);
  if (*generate) return app::generate_command(env, app::split_generate_arguments(generate_deck));
  if (*serve) {
    app::ServeOptions serve_options = app::split_serve_arguments(serve_deck);
    serve_options.json_path = serve_json;
    serve_options.svg_path = serve_svg;
    return app::serve_command(env, serve_options);
  }
  if (*tune) return app::tune_command(env, tune_options);
  return app::sweep_command(env, sweep_options);
}

}  // namespace
}  // namespace kpipe::app

int kpipe::main(int argc, char** argv) {
  using namespace kpipe::app;
  runtime::Environment env(argc, argv);
  try {
    return run_cli(env, without_kokkos_flags(argc, argv));
  } catch (const kpipe::Error& e) {
    if (!e.context().empty() && log::is_root()) {
      std::fputs(e.context().c_str(), stdout);
      std::fflush(stdout);
    }
    report(e.what());
    return e.exit_code();
  } catch (const std::exception& e) {
    const kpipe::Error error = kpipe::error_of_failure(e, "the command");
    report(error.what());
    return error.exit_code();
  }
}
