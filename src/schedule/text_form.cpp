#include "kpipe/schedule/text_form.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <limits>
#include <ostream>
#include <sstream>

#include "kpipe/core/error.hpp"
#include "kpipe/core/input_file.hpp"
#include "kpipe/core/limits.hpp"
#include "kpipe/core/strings.hpp"
#include "kpipe/schedule/lower.hpp"
#include "kpipe/schedule/registry.hpp"
#include "kpipe/schedule/validate.hpp"

namespace kpipe::schedule {

namespace {

// Action fields in the order they are written; a kind takes the first
// field_count(kind) of them, an F&B its own four (its BW half where a message has peer and tag).
constexpr std::array<std::string_view, 4> message_fields = {"mb", "chunk", "peer", "tag"};
constexpr std::array<std::string_view, 4> overlapped_fields = {"mb", "chunk", "bw_mb", "bw_chunk"};
constexpr std::array<std::string_view, 4> header_names = {"name", "p", "v", "m"};

std::size_t field_count(ActionKind kind) {
  return is_step_level(kind) ? 0 : is_communication(kind) || kind == ActionKind::forward_backward ? 4 : 2;
}
const std::array<std::string_view, 4>& field_names(ActionKind kind) {
  return kind == ActionKind::forward_backward ? overlapped_fields : message_fields;
}
std::string example(ActionKind kind) {
  return describe(kind == ActionKind::forward_backward ? overlapped_action(1, 0, 0, 1)
                                                       : message_action(kind, 0, 0, 1, 0));
}

std::vector<std::string> as_strings(const std::vector<std::string_view>& views) { return {views.begin(), views.end()}; }

std::vector<std::string> kind_names() {
  std::vector<std::string> names;
  for (int k = 0; k < action_kind_count; ++k) names.emplace_back(name(static_cast<ActionKind>(k)));
  return names;
}

std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates) {
  const std::string match = nearest_match(word, candidates);
  return match.empty() ? "" : fmt::format(" (did you mean '{}'?)", match);
}

class Parser {
 public:
  Parser(std::string_view text, std::string_view source) : text_(text) { file_.source = std::string(source); }

  ScheduleFile run() {
    std::size_t begin = text_.rfind("\xEF\xBB\xBF", 0) == 0 ? 3 : 0;  // a UTF-8 byte order mark
    while (begin <= text_.size()) {
      const std::size_t end = std::min(text_.find('\n', begin), text_.size());
      ++line_;
      parse_line(text_.substr(begin, end - begin));
      begin = end + 1;
    }
    if (header_line_ == 0) {
      throw input_error(
          fmt::format("{}: no 'schedule name=NAME p=P v=V m=M' header line; this is not a kpipe "
                      "schedule file",
                      file_.source));
    }
    require_every_forward();
    return std::move(file_);
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw input_error(fmt::format("{}:{}: {}", file_.source, line_, what));
  }

  // Every microbatch passes forward through every chunk of every rank, so a
  // file with far fewer F actions than p·v·m has a wrong header. Checked
  // before lowering, validation or simulation allocate anything per microbatch;
  // a few missing ones are left to the validator, which names the line.
  void require_every_forward() {
    const Schedule& s = file_.schedule;
    std::int64_t forwards = 0;
    for (const auto& actions : s.ranks) {
      for (const Action& a : actions) {
        for_each_part(a, [&](const Action& part) { forwards += part.kind == ActionKind::forward ? 1 : 0; });
      }
    }
    const std::int64_t needed = std::int64_t{s.p} * s.v * s.m;
    if (needed - forwards <= limits::schedule_missing_forwards) return;
    line_ = header_line_;
    fail(
        fmt::format("the header says p·v·m = {}·{}·{} = {} forward passes, but the file has {} F action{}; fix "
                    "p=, v= or m= in the header, or add the missing F actions",
                    s.p, s.v, s.m, needed, forwards, forwards == 1 ? "" : "s"));
  }

  // Names reach SVG, JSON and terminals; letters, digits, '.', '_' and '-' need no escaping anywhere.
  void check_name(std::string_view name) const {
    const bool plain = name.size() <= limits::schedule_name_bytes && std::all_of(name.begin(), name.end(), [](char c) {
                         return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
                       });
    if (!plain) {
      fail(fmt::format("name='{}': a schedule name is 1 to {} letters, digits, '.', '_' or '-', e.g. name=my-1f1b",
                       printable(name.substr(0, 80)), limits::schedule_name_bytes));
    }
  }

  void parse_line(std::string_view line) {
    line = line.substr(0, line.find('#'));
    std::vector<std::string_view> tokens;
    std::size_t at = 0;
    while (true) {
      while (at < line.size() && std::isspace(static_cast<unsigned char>(line[at]))) ++at;
      if (at >= line.size()) break;
      const std::size_t start = at;
      while (at < line.size() && !std::isspace(static_cast<unsigned char>(line[at]))) ++at;
      tokens.push_back(line.substr(start, at - start));
    }
    if (tokens.empty()) return;
    if (tokens[0] == "schedule") return parse_header(tokens);
    if (header_line_ == 0) {
      fail(fmt::format("expected the header 'schedule name=NAME p=P v=V m=M' first, got '{}'", tokens[0]));
    }
    if (tokens[0] == "rank") return parse_rank(tokens);
    parse_action(tokens);
  }

  // "key=value" tokens after the first, each key from `names` at most once.
  template <std::size_t N>
  std::array<std::string_view, N> fields(const std::vector<std::string_view>& tokens,
                                         const std::array<std::string_view, N>& names, std::size_t allowed,
                                         std::string_view what) const {
    std::array<std::string_view, N> values{};
    const std::vector<std::string_view> accepted(names.begin(), names.begin() + allowed);
    for (std::size_t t = 1; t < tokens.size(); ++t) {
      const std::size_t equals = tokens[t].find('=');
      if (equals == std::string_view::npos) fail(fmt::format("expected key=value after {}, got '{}'", what, tokens[t]));
      const std::string_view key = tokens[t].substr(0, equals);
      std::size_t k = 0;
      while (k < allowed && names[k] != key) ++k;
      if (k == allowed) {
        fail(fmt::format("unknown field '{}'{}; {} takes {}", key, did_you_mean(key, as_strings(accepted)), what,
                         accepted.empty() ? std::string("no fields") : join_choices(as_strings(accepted), " and ")));
      }
      if (!values[k].empty()) fail(fmt::format("field '{}' given twice", key));
      values[k] = tokens[t].substr(equals + 1);
      if (values[k].empty()) fail(fmt::format("field '{}' has no value", key));
    }
    return values;
  }

  // `written` is how the number appears in the line, for messages: "mb=4", "rank 2".
  long long integer(std::string_view written, std::string_view value, long long min, long long max,
                    std::string_view range) const {
    long long number = 0;
    const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), number);
    if (error != std::errc() || end != value.data() + value.size()) {
      fail(fmt::format("{}: '{}' is not an integer", written, value));
    }
    if (number < min || number > max) fail(fmt::format("{} is out of range: {}", written, range));
    return number;
  }
  long long field(std::string_view key, std::string_view value, long long min, long long max,
                  std::string_view range) const {
    return integer(fmt::format("{}={}", key, value), value, min, max, range);
  }

  void parse_header(const std::vector<std::string_view>& tokens) {
    if (header_line_ != 0) fail(fmt::format("a second 'schedule' header (the first is at line {})", header_line_));
    const auto values = fields(tokens, header_names, header_names.size(), "schedule");
    for (std::size_t k = 0; k < header_names.size(); ++k) {
      if (values[k].empty()) {
        fail(fmt::format("the header needs {}=; write e.g. 'schedule name=custom p=4 v=1 m=8'", header_names[k]));
      }
    }
    Schedule& s = file_.schedule;
    check_name(values[0]);
    s.name = std::string(values[0]);
    s.p = static_cast<int>(field("p", values[1], 1, limits::pipeline_ranks,
                                 fmt::format("p must be 1 to {} pipeline ranks", limits::pipeline_ranks)));
    s.v = static_cast<int>(field("v", values[2], 1, limits::chunks_per_rank,
                                 fmt::format("v must be 1 to {} chunks per rank", limits::chunks_per_rank)));
    s.m = static_cast<int>(field("m", values[3], 1, limits::microbatches, "m must be 1 to 2^30 microbatches"));
    const double plan_actions = limits::actions_per_microbatch_and_chunk * s.p * s.v * s.m;
    if (plan_actions > limits::plan_actions) {
      fail(
          fmt::format("p = {}, v = {}, m = {} make a plan of about {:.0f} million actions; kpipe plans at most "
                      "{:.0f} million (p·v·m <= {:.0f} million)",
                      s.p, s.v, s.m, plan_actions / 1e6, limits::plan_actions / 1e6,
                      limits::plan_actions / limits::actions_per_microbatch_and_chunk / 1e6));
    }
    s.placement = placement_of(s.name, s.p, s.v);
    s.ranks.assign(static_cast<std::size_t>(s.p), {});
    file_.lines.assign(static_cast<std::size_t>(s.p), {});
    rank_lines_.assign(static_cast<std::size_t>(s.p), 0);
    header_line_ = line_;
  }

  void parse_rank(const std::vector<std::string_view>& tokens) {
    if (tokens.size() != 2) fail("expected 'rank N' on a line of its own");
    const int p = file_.schedule.p;
    rank_ = static_cast<int>(integer(fmt::format("rank {}", tokens[1]), tokens[1], 0, p - 1,
                                     fmt::format("ranks are numbered 0 to {} (p = {})", p - 1, p)));
    if (rank_lines_[rank_] != 0) {
      fail(fmt::format("rank {} appears twice (first at line {})", rank_, rank_lines_[rank_]));
    }
    rank_lines_[rank_] = line_;
  }

  void parse_action(const std::vector<std::string_view>& tokens) {
    const auto kind = parse_kind(tokens[0]);
    if (!kind) {
      std::string upper(tokens[0]);
      for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      fail(fmt::format("unknown action '{}'{}; actions are {}", tokens[0], did_you_mean(upper, kind_names()),
                       join_choices(kind_names())));
    }
    if (rank_ < 0) fail(fmt::format("action '{}' before the first 'rank N' line", tokens[0]));
    const Schedule& s = file_.schedule;
    const std::size_t count = field_count(*kind);
    const auto& names = field_names(*kind);
    const auto values = fields(tokens, names, count, name(*kind));
    for (std::size_t k = 0; k < count; ++k) {
      if (values[k].empty()) fail(fmt::format("{} needs {}=; write e.g. '{}'", name(*kind), names[k], example(*kind)));
    }
    const auto microbatch = [&](std::size_t k) {
      return static_cast<std::int32_t>(
          field(names[k], values[k], 0, s.m - 1,
                fmt::format("the schedule has m = {} microbatches, numbered 0 to {}", s.m, s.m - 1)));
    };
    const auto chunk = [&](std::size_t k) {
      return static_cast<int>(
          field(names[k], values[k], 0, s.v - 1,
                fmt::format("the schedule has v = {} chunks per rank, numbered 0 to {}", s.v, s.v - 1)));
    };
    Action action = step_action(*kind);
    if (*kind == ActionKind::forward_backward) {
      action = overlapped_action(microbatch(0), chunk(1), microbatch(2), chunk(3));
    } else if (count >= 2) {
      action.microbatch = microbatch(0);
      action.chunk = static_cast<std::int8_t>(chunk(1));
    }
    if (is_communication(*kind)) {
      action.peer = static_cast<std::int16_t>(
          field("peer", values[2], 0, s.p - 1, fmt::format("ranks are numbered 0 to {} (p = {})", s.p - 1, s.p)));
      action.tag = static_cast<std::int32_t>(
          field("tag", values[3], 0, std::numeric_limits<std::int32_t>::max(), "a tag is a non-negative int32"));
    }
    file_.schedule.ranks[rank_].push_back(action);
    file_.lines[rank_].push_back(line_);
  }

  std::string_view text_;
  ScheduleFile file_;
  int line_ = 0;
  int header_line_ = 0;
  int rank_ = -1;
  std::vector<int> rank_lines_;  // per rank: the line of its 'rank N', 0 when not seen yet
};

}  // namespace

void write_text(std::ostream& out, const Schedule& schedule) {
  out << "# kpipe schedule, one action per line (see docs/schedules.md)\n";
  out << fmt::format("schedule name={} p={} v={} m={}\n", schedule.name, schedule.p, schedule.v, schedule.m);
  std::string buffer;
  for (std::size_t r = 0; r < schedule.ranks.size(); ++r) {
    buffer = fmt::format("rank {}\n", r);
    for (const Action& action : schedule.ranks[r]) {
      buffer += "  ";
      buffer += describe(action);
      buffer += '\n';
    }
    out << buffer;
  }
}

std::string to_text(const Schedule& schedule) {
  std::ostringstream out;
  write_text(out, schedule);
  return out.str();
}

ScheduleFile parse_text(std::string_view text, std::string_view source) { return Parser(text, source).run(); }

ScheduleFile read_schedule_file(const std::string& path) { return parse_text(read_schedule_text(path), path); }

std::string read_schedule_text(const std::string& path) {
  return read_input_file(path, {"schedule file", limits::schedule_file_bytes,
                                "; pipeline.schedule_file is relative to the working directory"});
}

Schedule checked_schedule(ScheduleFile file) {
  Schedule& schedule = file.schedule;
  const bool lowered = is_lowered(schedule);
  std::vector<std::vector<std::int32_t>> origins;
  if (!lowered) lower(schedule, &origins);
  if (const auto problems = find_problems(schedule); !problems.empty()) {
    const Problem& problem = problems.front();
    std::string where = file.source;
    if (problem.rank >= 0 && problem.action >= 0) {
      const std::int64_t written = lowered ? problem.action : origins[problem.rank][problem.action];
      if (written >= 0) where += fmt::format(":{}", file.lines[problem.rank][written]);
    }
    const std::string more =
        problems.size() > 1 ? fmt::format(" (and {} more, marked above)", problems.size() - 1) : std::string();
    throw input_error(fmt::format("{}: invalid schedule: {}{}", where, problem.message, more))
        .with_context(problem_grid(schedule, problems));
  }
  return std::move(schedule);
}

}  // namespace kpipe::schedule
