#include "kpipe/core/fault.hpp"

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

#include "kpipe/core/error.hpp"

namespace kpipe::fault {

namespace {

struct Fault {
  int rank = 0;
  Phase phase = Phase::setup;
  int step = 0;
};

constexpr std::string_view format_help = "KPIPE_FAULT=RANK:PHASE[:STEP] with PHASE setup, step or checkpoint";

std::optional<Phase> parse_phase(std::string_view text) {
  if (text == "setup") return Phase::setup;
  if (text == "step") return Phase::step;
  if (text == "checkpoint") return Phase::checkpoint;
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
  }
  return "?";
}

std::optional<Fault> parse(const char* text) {
  if (text == nullptr || *text == '\0') return std::nullopt;
  const std::string value = text;
  const auto bad = [&] {
    return input_error(fmt::format("KPIPE_FAULT = '{}' is not valid; use {}", value, format_help));
  };
  Fault fault;
  char phase[16] = {};
  int step = 0;
  const int fields = std::sscanf(value.c_str(), "%d:%15[a-z]:%d", &fault.rank, phase, &step);
  const auto parsed = fields >= 2 ? parse_phase(phase) : std::nullopt;
  if (!parsed || fault.rank < 0 || step < 0) throw bad();
  fault.phase = *parsed;
  fault.step = fields == 3 ? step : 0;
  return fault;
}

}  // namespace

void inject(Phase phase, int world_rank, int step) {
  static const std::optional<Fault> fault = parse(std::getenv("KPIPE_FAULT"));
  if (!fault || fault->rank != world_rank || fault->phase != phase || (phase == Phase::step && fault->step != step)) {
    return;
  }
  throw runtime_error(fmt::format("injected fault in {}{} (KPIPE_FAULT, a test-only setting)", name(phase),
                                  phase == Phase::step ? fmt::format(" {}", step) : ""));
}

}  // namespace kpipe::fault
