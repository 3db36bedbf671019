#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "kpipe/schedule/validate.hpp"
#include "report_format.hpp"

namespace kpipe::schedule {

namespace {

// Rows shown around each marked action; ranks shown around each marked rank
// when the schedule has more than all_ranks_up_to.
constexpr std::int64_t rows_around = 4;
constexpr int all_ranks_up_to = 12;

}  // namespace

std::string problem_grid(const Schedule& schedule, const std::vector<Problem>& problems) {
  std::set<std::pair<int, std::int64_t>> marked;
  std::set<std::int64_t> rows;
  std::set<int> ranks;
  for (const Problem& problem : problems) {
    if (problem.rank < 0 || problem.rank >= schedule.p || problem.action < 0 ||
        problem.action >= static_cast<std::int64_t>(schedule.ranks[problem.rank].size())) {
      continue;
    }
    marked.emplace(problem.rank, problem.action);
    for (std::int64_t row = problem.action - rows_around; row <= problem.action + rows_around; ++row) {
      if (row >= 0) rows.insert(row);
    }
    for (int rank = problem.rank - 1; rank <= problem.rank + 1; ++rank) {
      if (rank >= 0 && rank < schedule.p) ranks.insert(rank);
    }
  }
  if (marked.empty()) return {};
  if (schedule.p <= all_ranks_up_to) {
    for (int rank = 0; rank < schedule.p; ++rank) ranks.insert(rank);
  }

  std::size_t width = 6;  // "rank N" headers
  for (const int rank : ranks) {
    for (const std::int64_t row : rows) {
      if (row < static_cast<std::int64_t>(schedule.ranks[rank].size())) {
        width = std::max(width, detail::action_label(schedule.ranks[rank][row], schedule.v).size());
      }
    }
  }
  std::string grid = fmt::format(
      "invalid {} schedule: its lowered actions (with the messages kpipe adds), >the "
      "action< each problem names\n{:>7}",
      schedule.name, "action");
  for (const int rank : ranks) grid += fmt::format("  {:^{}}", fmt::format("rank {}", rank), width + 2);
  // Trailing spaces of a last column are noise in a terminal and in a diff.
  const auto end_line = [&grid] {
    grid.erase(grid.find_last_not_of(' ') + 1);
    grid += "\n";
  };
  end_line();
  std::int64_t previous = -1;
  for (const std::int64_t row : rows) {
    if (previous >= 0 && row != previous + 1) grid += fmt::format("{:>7}\n", "...");
    previous = row;
    grid += fmt::format("{:>7}", row);
    for (const int rank : ranks) {
      std::string text;
      if (row < static_cast<std::int64_t>(schedule.ranks[rank].size())) {
        text = detail::action_label(schedule.ranks[rank][row], schedule.v);
        text = marked.count({rank, row}) ? ">" + text + "<" : " " + text + " ";
      }
      grid += fmt::format("  {:<{}}", text, width + 2);
    }
    end_line();
  }
  return grid;
}

}  // namespace kpipe::schedule
