#include <fmt/format.h>

#include <cmath>

#include "kpipe/schedule/render.hpp"
#include "report_format.hpp"

namespace kpipe::schedule {

namespace {

int digits(int n) { return n < 10 ? 1 : 1 + digits(n / 10); }

// The size of detail::action_label of a compute action, without making it.
std::size_t box_label_size(const Action& a, int v) {
  if (a.kind == ActionKind::forward_backward) {
    return box_label_size(forward_half(a), v) + 1 + box_label_size(backward_half(a), v);
  }
  return name(a.kind).size() + digits(a.microbatch) + (v > 1 ? 1 + digits(a.chunk) : 0);
}

}  // namespace

bool ascii_timeline_can_fit(const Schedule& schedule, int max_columns) {
  const std::size_t prefix = 7 + static_cast<std::size_t>(digits(schedule.p - 1));
  for (const auto& actions : schedule.ranks) {
    std::size_t columns = prefix;
    for (const Action& a : actions) {
      if (is_compute(a.kind) && (columns += 3) > static_cast<std::size_t>(max_columns)) return false;
    }
  }
  return true;
}

std::optional<std::string> ascii_timeline(const Schedule& schedule, const SimulationResult& result, int max_columns) {
  const std::string rank_format = fmt::format("rank {{:<{}}} |", digits(schedule.p - 1));
  const int prefix = static_cast<int>(fmt::format(fmt::runtime(rank_format), 0).size());
  // Columns per time unit: the narrowest box must hold its label and a space.
  double scale = 0.0;
  for (int r = 0; r < schedule.p; ++r) {
    const auto& actions = schedule.ranks[r];
    for (std::size_t i = 0; i < actions.size(); ++i) {
      const double duration = result.end[r][i] - result.start(r, i);
      if (!is_compute(actions[i].kind) || duration <= 0.0) continue;
      scale = std::max(scale, static_cast<double>(box_label_size(actions[i], schedule.v) + 1) / duration);
      if (prefix + result.makespan * scale > max_columns) return std::nullopt;
    }
  }
  const auto columns = static_cast<std::size_t>(std::ceil(result.makespan * scale));

  std::string ruler(prefix + columns + 8, ' ');
  ruler.replace(0, 4, "time");
  const double step = detail::round_step(10.0 / scale);
  for (double t = 0.0; t <= result.makespan; t += step) {
    const std::string tick = detail::format_time(t);
    const auto at = prefix + static_cast<std::size_t>(std::lround(t * scale));
    if (at + tick.size() <= ruler.size()) ruler.replace(at, tick.size(), tick);
  }
  ruler.erase(ruler.find_last_not_of(' ') + 1);
  std::string text = ruler + "\n";

  bool overlapped = false;
  for (int r = 0; r < schedule.p; ++r) {
    std::string row(columns, '.');
    const auto& actions = schedule.ranks[r];
    for (std::size_t i = 0; i < actions.size(); ++i) {
      if (!is_compute(actions[i].kind)) continue;
      overlapped = overlapped || actions[i].kind == ActionKind::forward_backward;
      const auto from = static_cast<std::size_t>(std::lround(result.start(r, i) * scale));
      const auto to = std::min(columns, static_cast<std::size_t>(std::lround(result.end[r][i] * scale)));
      row.replace(from, to - from, to - from, ' ');
      const std::string label = detail::action_label(actions[i], schedule.v);
      row.replace(from, std::min(label.size(), to - from), label, 0, to - from);
    }
    row.erase(row.find_last_not_of(' ') + 1);
    text += fmt::format(fmt::runtime(rank_format), r) + row + "\n";
  }
  text += schedule.v > 1
              ? "F forward, B input gradient, W weight gradient, BW full backward; F3.1 = microbatch 3, "
                "chunk 1; . idle\n"
              : "F forward, B input gradient, W weight gradient, BW full backward; F3 = microbatch 3; . idle\n";
  if (overlapped) text += "F5.0&BW2.1 = F of microbatch 5 chunk 0 and BW of microbatch 2 chunk 1 at once (F&B)\n";
  return text;
}

}  // namespace kpipe::schedule
