#include "kpipe/core/fault.hpp"

#include <fmt/format.h>

#include <charconv>
#include <csignal>
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>
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

// Every phase by its name in KPIPE_FAULT.
constexpr std::pair<Phase, std::string_view> phases[] = {
    {Phase::setup, "setup"},
    {Phase::step, "step"},
    {Phase::checkpoint, "checkpoint"},
    {Phase::checkpoint_stall, "checkpoint-stall"},
    {Phase::restart_stall, "restart-stall"},
    {Phase::hdf5_crash, "hdf5-crash"},
    {Phase::hdf5_stall, "hdf5-stall"},
    {Phase::grid_stall, "grid-stall"},
};

std::string format_help() {
  std::vector<std::string> names;
  for (const auto& [phase, name] : phases) names.emplace_back(name);
  return "KPIPE_FAULT=RANK:PHASE[:STEP] with PHASE " + join_choices(names);
}

std::optional<Phase> parse_phase(std::string_view text) {
  for (const auto& [phase, name] : phases) {
    if (name == text) return phase;
  }
  return std::nullopt;
}

std::string_view name_of(Phase phase) {
  for (const auto& [candidate, name] : phases) {
    if (candidate == phase) return name;
  }
  return "?";
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
  if (phase == Phase::checkpoint_stall || phase == Phase::restart_stall || phase == Phase::hdf5_stall ||
      phase == Phase::grid_stall) {
    std::raise(SIGSTOP);  // until the job (or the checking parent) ends it
    return;
  }
  if (phase == Phase::hdf5_crash) std::raise(SIGSEGV);
  throw runtime_error(fmt::format("injected fault in {}{} (KPIPE_FAULT, a test-only setting)", name_of(phase),
                                  phase == Phase::step ? fmt::format(" {}", step) : ""));
}

}  // namespace kpipe::fault
