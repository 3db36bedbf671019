#include <fmt/format.h>

#include <algorithm>

#include "kpipe/schedule/render.hpp"
#include "report_format.hpp"

namespace kpipe::schedule {

namespace {

// Beyond this many ranks the table shows the first and last `edge` ranks.
constexpr int all_ranks_up_to = 64;
constexpr int edge = 16;

// idle %: of the makespan; span idle %: of the rank's span (first compute to last).
std::string row(const std::string& rank, const RankStats& s, double makespan) {
  const double idle_share = makespan > 0.0 ? 100.0 * s.idle / makespan : 0.0;
  const double span_idle_share = s.span > 0.0 ? 100.0 * (s.span - s.busy) / s.span : 0.0;
  return fmt::format("{:>6} {:>12} {:>12} {:>7.1f}% {:>12} {:>11.1f}% {:>13} {:>12}\n", rank,
                     detail::format_time(s.busy), detail::format_time(s.idle), idle_share, detail::format_time(s.span),
                     span_idle_share, s.peak_stashed, detail::format_bytes(s.bytes_sent));
}

}  // namespace

std::string summary_table(const Schedule& schedule, const SimulationResult& result) {
  std::string table = fmt::format("{:>6} {:>12} {:>12} {:>8} {:>12} {:>12} {:>13} {:>12}\n", "rank", "busy", "idle",
                                  "idle %", "span", "span idle %", "peak stashed", "bytes sent");
  const int p = schedule.p;
  for (int r = 0; r < p; ++r) {
    if (p > all_ranks_up_to && r == edge) {
      table += fmt::format("{:>6} ({} ranks not shown; --json lists every rank)\n", "...", p - 2 * edge);
      r = p - edge;
    }
    table += row(std::to_string(r), result.ranks[r], result.makespan);
  }
  RankStats total;
  total.busy = result.total_busy;
  total.idle = result.total_idle;
  for (const auto& s : result.ranks) total.span += s.span;
  for (const auto& s : result.ranks) total.peak_stashed = std::max(total.peak_stashed, s.peak_stashed);
  total.bytes_sent = result.bytes_moved;
  table += row("all", total, result.makespan * p);
  return table;
}

}  // namespace kpipe::schedule
