#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <ostream>

#include "kpipe/schedule/render.hpp"

namespace kpipe::schedule {

namespace {

// Trace timestamps are microseconds; one simulated unit is drawn as 1 ms.
constexpr double microseconds_per_unit = 1000.0;

// A JSON string literal, quotes included: the schedule name comes from a user's file.
std::string json_string(const std::string& text) {
  return nlohmann::json(text).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace

// Written as a stream of events, so a plan of millions of actions needs no
// document in memory. Receives that waited appear as "wait" events, so idle
// time from waiting for a message shows apart from the bubble.
void write_chrome_trace(std::ostream& out, const Schedule& schedule, const SimulationResult& result) {
  std::string buffer = fmt::format(
      "{{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n{{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":0,"
      "\"args\":{{\"name\":{}}}}}",
      json_string(fmt::format("kpipe plan: {} p={} v={} m={}", schedule.name, schedule.p, schedule.v, schedule.m)));
  for (int r = 0; r < schedule.p; ++r) {
    fmt::format_to(
        std::back_inserter(buffer),
        ",\n{{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":0,\"tid\":{0},\"args\":{{\"name\":\"rank {0}\"}}}}", r);
    const auto& actions = schedule.ranks[r];
    for (std::size_t i = 0; i < actions.size(); ++i) {
      const Action& a = actions[i];
      const double start = result.start(r, i);
      const double duration = result.end[r][i] - start;
      if (!(is_compute(a.kind) || (is_receive(a.kind) && duration > 0.0))) continue;
      fmt::format_to(std::back_inserter(buffer),
                     ",\n{{\"name\":\"{}\",\"cat\":\"{}\",\"ph\":\"X\",\"pid\":0,\"tid\":{},\"ts\":{},\"dur\":{},"
                     "\"args\":{{\"microbatch\":{},\"chunk\":{},\"stage\":{}}}}}",
                     describe(a), is_compute(a.kind) ? name(a.kind) : "wait", r, start * microseconds_per_unit,
                     duration * microseconds_per_unit, a.microbatch, a.chunk, schedule.placement.stage(r, a.chunk));
      if (buffer.size() > (1 << 20)) {
        out << buffer;
        buffer.clear();
      }
    }
  }
  buffer += "\n]}\n";
  out << buffer;
}

}  // namespace kpipe::schedule
