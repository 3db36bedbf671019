#include "kpipe/core/fault.hpp"

#include <fmt/format.h>

#include <csignal>

#include <charconv>
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

constexpr std::string_view format_help =
    "KPIPE_FAULT=RANK:PHASE[:STEP] with PHASE setup, step, checkpoint, checkpoint-stall, restart-stall, "
    "hdf5-crash or hdf5-stall";

std::optional<Phase> parse_phase(std::string_view text) {
  if (text == "setup") return Phase::setup;
  if (text == "step") return Phase::step;
  if (text == "checkpoint") return Phase::checkpoint;
  if (text == "checkpoint-stall") return Phase::checkpoint_stall;
  if (text == "restart-stall") return Phase::restart_stall;
  if (text == "hdf5-crash") return Phase::hdf5_crash;
  if (text == "hdf5-stall") return Phase::hdf5_stall;
  return std::nullopt;
}

std::string_view name(Phase phase) {
  switch (phase) {
    case Phase::setup:
      return "setup";
    case Phase::step:
      return "step";
    case Phase::checkpoint:
      return "checkpoint";
    case Phase::checkpoint_stall:
      return "checkpoint-stall";
    case Phase::restart_stall:
      return "restart-stall";
    case Phase::hdf5_crash:
      return "hdf5-crash";
    case Phase::hdf5_stall:
      return "hdf5-stall";
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
    throw input_error(fmt::format("KPIPE_FAULT = '{}' is not valid; use {}", printable(value), format_help));
  }
  return Fault{*rank, *phase, *step};
}

}  // namespace

void inject(Phase phase, int world_rank, int step) {
  static const std::optional<Fault> fault = parse(std::getenv("KPIPE_FAULT"));
  if (!fault || fault->rank != world_rank || fault->phase != phase || (phase == Phase::step && fault->step != step)) {
    return;
  }
  if (phase == Phase::checkpoint_stall || phase == Phase::restart_stall || phase == Phase::hdf5_stall) {
    std::raise(SIGSTOP);  // until the job (or the checking parent) ends it
    return;
  }
  if (phase == Phase::hdf5_crash) std::raise(SIGSEGV);
  throw runtime_error(fmt::format("injected fault in {}{} (KPIPE_FAULT, a test-only setting)", name(phase),
                                  phase == Phase::step ? fmt::format(" {}", step) : ""));
}

}  // namespace kpipe::fault
