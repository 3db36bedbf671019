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

// Writes the events as a stream, so a plan of millions of actions needs no
// document in memory.
class TraceWriter {
 public:
  explicit TraceWriter(std::ostream& out) : out_(out) { buffer_ = "{\"displayTimeUnit\":\"ms\",\"traceEvents\":["; }
  ~TraceWriter() = default;
  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;

  void process_name(int pid, const std::string& name) {
    separate();
    fmt::format_to(std::back_inserter(buffer_),
                   "{{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":{},\"args\":{{\"name\":{}}}}}", pid,
                   json_string(name));
  }
  void thread_name(int pid, int tid, const std::string& name) {
    separate();
    fmt::format_to(std::back_inserter(buffer_),
                   "{{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":{},\"tid\":{},\"args\":{{\"name\":{}}}}}", pid, tid,
                   json_string(name));
  }
  // A complete ("X") event; `args` is the inside of a JSON object.
  void complete(const std::string& name, std::string_view category, int pid, int tid, double ts, double dur,
                const std::string& args) {
    separate();
    fmt::format_to(
        std::back_inserter(buffer_),
        "{{\"name\":\"{}\",\"cat\":\"{}\",\"ph\":\"X\",\"pid\":{},\"tid\":{},\"ts\":{},\"dur\":{},\"args\":{{{}}}}}",
        name, category, pid, tid, ts, dur, args);
    if (buffer_.size() > (1 << 20)) {
      out_ << buffer_;
      buffer_.clear();
    }
  }
  void finish() {
    buffer_ += "\n]}\n";
    out_ << buffer_;
    buffer_.clear();
  }

 private:
  void separate() {
    if (!first_) buffer_ += ',';
    buffer_ += '\n';
    first_ = false;
  }

  std::ostream& out_;
  std::string buffer_;
  bool first_ = true;
};

}  // namespace

// Receives that waited appear as "wait" events, so idle time from waiting for
// a message shows apart from the bubble.
void write_chrome_trace(std::ostream& out, const Schedule& schedule, const SimulationResult& result) {
  TraceWriter trace(out);
  trace.process_name(0,
                     fmt::format("kpipe plan: {} p={} v={} m={}", schedule.name, schedule.p, schedule.v, schedule.m));
  for (int r = 0; r < schedule.p; ++r) {
    trace.thread_name(0, r, fmt::format("rank {}", r));
    const auto& actions = schedule.ranks[r];
    for (std::size_t i = 0; i < actions.size(); ++i) {
      const Action& a = actions[i];
      const double start = result.start(r, i);
      const double duration = result.end[r][i] - start;
      if (!(is_compute(a.kind) || (is_receive(a.kind) && duration > 0.0))) continue;
      trace.complete(describe(a), is_compute(a.kind) ? name(a.kind) : "wait", 0, r, start * microseconds_per_unit,
                     duration * microseconds_per_unit,
                     fmt::format("\"microbatch\":{},\"chunk\":{},\"stage\":{}", a.microbatch, a.chunk,
                                 schedule.placement.stage(r, a.chunk)));
    }
  }
  trace.finish();
}

// Every action is an event, messages and step-level actions too: a measured
// run's time goes to all of them, and the count is checkable (steps × actions).
void write_chrome_trace(std::ostream& out, const Timeline& timeline, const TraceOptions& options) {
  TraceWriter trace(out);
  for (int r = 0; r < timeline.p; ++r) {
    trace.process_name(r, fmt::format("{} rank {}", options.title, r));
    trace.thread_name(r, 0, "actions");
    for (const TimedAction& t : timeline.ranks[r]) {
      const Action& a = t.action;
      trace.complete(describe(a), name(a.kind), r, 0, t.start * options.microseconds_per_unit,
                     (t.end - t.start) * options.microseconds_per_unit,
                     fmt::format("\"step\":{},\"microbatch\":{},\"chunk\":{},\"stage\":{}", t.step, a.microbatch,
                                 a.chunk, t.stage));
    }
  }
  trace.finish();
}

}  // namespace kpipe::schedule
