#include "kpipe/core/fault.hpp"

#include <fmt/format.h>

#include <charconv>
#include <csignal>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "kpipe/core/error.hpp"
#include "kpipe/core/strings.hpp"

namespace kpipe::fault {

namespace {

struct Fault {
  int rank = 0;
  Phase phase = Phase::setup;
  int step = 0;
};

// What a fault does to the rank it strikes.
enum class Action {
  fail,   // throws kpipe::runtime_error
  stop,   // SIGSTOP, as a hung node would
  crash,  // SIGSEGV
};

// Every phase: its name in KPIPE_FAULT and what a fault there does.
struct PhaseEntry {
  Phase phase;
  std::string_view name;
  Action action;
};
constexpr PhaseEntry phases[] = {
    {Phase::setup_memory, "setup-memory", Action::fail},
    {Phase::setup_stages, "setup-stages", Action::fail},
    {Phase::setup_data, "setup-data", Action::fail},
    {Phase::setup_optimizer, "setup-optimizer", Action::fail},
    {Phase::setup_evaluator, "setup-evaluator", Action::fail},
    {Phase::setup, "setup", Action::fail},
    {Phase::restart, "restart", Action::fail},
    {Phase::serve_setup, "serve-setup", Action::fail},
    {Phase::step, "step", Action::fail},
    {Phase::checkpoint, "checkpoint", Action::fail},
    {Phase::checkpoint_stall, "checkpoint-stall", Action::stop},
    {Phase::restart_stall, "restart-stall", Action::stop},
    {Phase::hdf5_crash, "hdf5-crash", Action::crash},
    {Phase::hdf5_stall, "hdf5-stall", Action::stop},
    {Phase::grid_stall, "grid-stall", Action::stop},
    {Phase::finalize_stall, "finalize-stall", Action::stop},
};

std::string format_help() {
  std::vector<std::string> names;
  for (const PhaseEntry& entry : phases) names.emplace_back(entry.name);
  return "KPIPE_FAULT=RANK:PHASE[:STEP] with PHASE " + join_choices(names);
}

std::optional<Phase> parse_phase(std::string_view text) {
  for (const PhaseEntry& entry : phases) {
    if (entry.name == text) return entry.phase;
  }
  return std::nullopt;
}

const PhaseEntry& entry_of(Phase phase) {
  for (const PhaseEntry& entry : phases) {
    if (entry.phase == phase) return entry;
  }
  throw runtime_error("a fault phase without an entry in the phase table");
}

// A whole field as a non-negative int: no sign, no trailing text, no overflow.
std::optional<int> count(std::string_view field) {
  int value = 0;
  const auto [end, error] = std::from_chars(field.data(), field.data() + field.size(), value);
  if (field.empty() || error != std::errc() || end != field.data() + field.size() || value < 0) return std::nullopt;
  return value;
}

std::optional<Fault> parse(const char* text) {
  if (text == nullptr || *text == '\0') return std::nullopt;
  const std::string_view value = text;
  std::vector<std::string_view> fields;
  for (std::size_t start = 0;;) {
    const std::size_t colon = value.find(':', start);
    fields.push_back(value.substr(start, colon == std::string_view::npos ? colon : colon - start));
    if (colon == std::string_view::npos) break;
    start = colon + 1;
  }
  const auto rank = count(fields.front());
  const auto phase = fields.size() >= 2 ? parse_phase(fields[1]) : std::nullopt;
  const auto step = fields.size() == 3 ? count(fields[2]) : std::optional<int>(0);
  if (fields.size() > 3 || !rank || !phase || !step) {
    throw input_error(fmt::format("KPIPE_FAULT = '{}' is not valid; use {}", printable(value), format_help()));
  }
  return Fault{*rank, *phase, *step};
}

}  // namespace

void inject(Phase phase, int world_rank, int step) {
  static const std::optional<Fault> fault = parse(std::getenv("KPIPE_FAULT"));
  if (!fault || fault->rank != world_rank || fault->phase != phase || (phase == Phase::step && fault->step != step)) {
    return;
  }
  const PhaseEntry& entry = entry_of(phase);
  switch (entry.action) {
    case Action::stop:
      std::raise(SIGSTOP);  // until the job (or the checking parent) ends it
      return;
    case Action::crash:
      std::raise(SIGSEGV);
      [[fallthrough]];  // should the signal be caught
    case Action::fail:
      throw runtime_error(fmt::format("injected fault in {}{} (KPIPE_FAULT, a test-only setting)", entry.name,
                                      phase == Phase::step ? fmt::format(" {}", step) : ""));
  }
}

}  // namespace kpipe::fault
