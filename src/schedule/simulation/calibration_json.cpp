// Calibrations and cost fits as JSON, and reading them back for
// `kpipe plan --costs` with one-line errors naming the field.

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>

#include "kpipe/core/error.hpp"
#include "kpipe/core/limits.hpp"
#include "kpipe/core/strings.hpp"
#include "kpipe/schedule/calibration.hpp"

namespace kpipe::schedule {

namespace {

using nlohmann::json;

constexpr const char* writers = "write it with 'kpipe run DECK --json FILE' or 'kpipe sweep DECK --json FILE'";

json line_json(const LinearCost& line) {
  return {{"fixed_seconds", line.fixed}, {"per_sample_seconds", line.per_sample}};
}

json calibration_object(const Calibration& c) {
  json stages = json::array();
  for (const StageCosts& s : c.stages) {
    stages.push_back({{"forward_seconds", s.forward},
                      {"backward_input_seconds", s.backward_input},
                      {"backward_weight_seconds", s.backward_weight}});
  }
  return {{"p", c.p},
          {"v", c.v},
          {"microbatch_size", c.microbatch_size},
          {"stages", stages},
          {"send_seconds", c.send_seconds},
          {"receive_seconds", c.receive_seconds},
          {"link_latency_seconds", c.link_latency},
          {"link_bandwidth_bytes_per_second", c.link_bandwidth},
          {"bytes_per_transfer", c.bytes_per_transfer},
          {"step_overhead_seconds", c.step_overhead},
          {"optimizer_seconds", c.optimizer_seconds},
          {"compute_spread", c.compute_spread},
          {"transfer_spread", c.transfer_spread},
          {"receive_spread", c.receive_spread},
          {"step_seconds", c.step_seconds},
          {"makespan_seconds", c.makespan},
          {"bubble", {{"idle_over_useful", c.bubble.idle_over_useful}, {"idle_over_total", c.bubble.idle_over_total}}}};
}

// Field access with the error a user can act on.
class Reader {
 public:
  explicit Reader(std::string source) : source_(std::move(source)) {}

  const json& object(const json& parent, const char* key, const std::string& where) const {
    const auto found = parent.find(key);
    if (found == parent.end() || !(found->is_object() || found->is_array())) missing(key, where, "an object");
    return *found;
  }
  double number(const json& parent, const char* key, const std::string& where) const {
    const auto found = parent.find(key);
    if (found == parent.end() || !found->is_number() || !std::isfinite(found->get<double>())) {
      missing(key, where, "a number");
    }
    return found->get<double>();
  }
  // A time a run measured or fitted: at most limits::cost_seconds in
  // magnitude, and not negative unless `signed_fit` (a fitted line's
  // intercept or slope may dip below zero).
  double seconds(const json& parent, const char* key, const std::string& where, bool signed_fit = false) const {
    const double x = number(parent, key, where);
    if (!(std::abs(x) <= limits::cost_seconds) || (!signed_fit && x < 0)) {
      throw input_error(fmt::format("{}: '{}' in {} is {} s; a {} time is {} to {} s; {}", printable(source_), key,
                                    where, x, signed_fit ? "fitted" : "measured",
                                    signed_fit ? -limits::cost_seconds : 0.0, limits::cost_seconds, writers));
    }
    return x;
  }
  // Bytes or bytes per second: 0 to 2^53 (exact in a double and an int64).
  double amount(const json& parent, const char* key, const std::string& where) const {
    const double x = number(parent, key, where);
    if (!(x >= 0 && x <= 9007199254740992.0)) {
      throw input_error(
          fmt::format("{}: '{}' in {} is {}; it must be 0 to 2^53; {}", printable(source_), key, where, x, writers));
    }
    return x;
  }
  int positive(const json& parent, const char* key, const std::string& where) const {
    const double x = number(parent, key, where);
    if (!(x >= 1 && x <= 1 << 30 && x == std::floor(x))) {
      throw input_error(
          fmt::format("{}: '{}' in {} is {}, not a positive integer; {}", printable(source_), key, where, x, writers));
    }
    return static_cast<int>(x);
  }
  // Optional: a list of factors >= 0; absent means no spread.
  std::vector<double> factors(const json& parent, const char* key, const std::string& where) const {
    const auto found = parent.find(key);
    if (found == parent.end()) return {};
    std::vector<double> out;
    if (!found->is_array()) missing(key, where, "a list of numbers");
    for (const json& x : *found) {
      if (!x.is_number() || !std::isfinite(x.get<double>()) || x.get<double>() < 0) {
        missing(key, where, "a list of numbers >= 0");
      }
      out.push_back(x.get<double>());
    }
    return out;
  }
  // "stages": one object per model stage, p·v of them; each read by `stage(object, where)`.
  template <class ReadStage>
  void stages(const json& parent, int count, const std::string& where, ReadStage&& stage) const {
    const json& list = object(parent, "stages", where);
    if (!list.is_array() || list.size() != static_cast<std::size_t>(count)) {
      missing("stages", where, "a list of p·v stage costs");
    }
    for (std::size_t s = 0; s < list.size(); ++s) {
      if (!list[s].is_object()) missing("stages", where, "a list of objects");
      stage(list[s], fmt::format("{}.stages[{}]", where, s));
    }
  }
  LinearCost line(const json& parent, const char* key, const std::string& where) const {
    const json& o = object(parent, key, where);
    const std::string inner = fmt::format("{}.{}", where, key);
    return {seconds(o, "fixed_seconds", inner, true), seconds(o, "per_sample_seconds", inner, true)};
  }

  [[noreturn]] void missing(const char* key, const std::string& where, const char* what) const {
    throw input_error(
        fmt::format("{}: '{}' in {} is missing or not {}; {}", printable(source_), key, where, what, writers));
  }

 private:
  std::string source_;
};

Calibration read_calibration(const json& o, const Reader& read) {
  const std::string where = "'calibration'";
  Calibration c;
  c.p = read.positive(o, "p", where);
  c.v = read.positive(o, "v", where);
  c.microbatch_size = read.positive(o, "microbatch_size", where);
  read.stages(o, c.p * c.v, where, [&](const json& stage, const std::string& at) {
    c.stages.push_back({read.seconds(stage, "forward_seconds", at), read.seconds(stage, "backward_input_seconds", at),
                        read.seconds(stage, "backward_weight_seconds", at)});
  });
  c.send_seconds = read.seconds(o, "send_seconds", where);
  c.receive_seconds = read.seconds(o, "receive_seconds", where);
  c.link_latency = read.seconds(o, "link_latency_seconds", where);
  c.link_bandwidth = read.amount(o, "link_bandwidth_bytes_per_second", where);
  c.bytes_per_transfer = static_cast<std::int64_t>(read.amount(o, "bytes_per_transfer", where));
  c.step_overhead = read.seconds(o, "step_overhead_seconds", where);
  // Files written before post-validation have no optimizer time: 0, as the makespan counts it.
  if (o.contains("optimizer_seconds")) c.optimizer_seconds = read.seconds(o, "optimizer_seconds", where);
  c.step_seconds = read.seconds(o, "step_seconds", where);
  c.makespan = read.seconds(o, "makespan_seconds", where);
  c.compute_spread = read.factors(o, "compute_spread", where);
  c.transfer_spread = read.factors(o, "transfer_spread", where);
  c.receive_spread = read.factors(o, "receive_spread", where);
  return c;
}

CostFit read_fit(const json& o, const Reader& read) {
  const std::string where = "'cost_fit'";
  CostFit fit;
  fit.p = read.positive(o, "p", where);
  fit.v = read.positive(o, "v", where);
  read.stages(o, fit.p * fit.v, where, [&](const json& stage, const std::string& at) {
    fit.stages.push_back({read.line(stage, "forward", at), read.line(stage, "backward_input", at),
                          read.line(stage, "backward_weight", at)});
  });
  fit.send = read.line(o, "send", where);
  fit.receive = read.line(o, "receive", where);
  fit.link = read.line(o, "link", where);
  fit.step_overhead = read.line(o, "step_overhead", where);
  fit.bytes_per_sample = read.amount(o, "bytes_per_sample", where);
  fit.compute_spread = read.factors(o, "compute_spread", where);
  fit.transfer_spread = read.factors(o, "transfer_spread", where);
  fit.receive_spread = read.factors(o, "receive_spread", where);
  // The measured runs: optional, a fit written before they were kept has the lines only.
  if (const auto runs = o.find("runs"); runs != o.end()) {
    if (!runs->is_array()) read.missing("runs", where, "a list of calibrations");
    for (const json& run : *runs) {
      if (!run.is_object()) read.missing("runs", where, "a list of objects");
      fit.runs.push_back(read_calibration(run, read));
      if (fit.runs.back().p != fit.p || fit.runs.back().v != fit.v) read.missing("runs", where, "of the fit's p and v");
    }
    if (!std::is_sorted(fit.runs.begin(), fit.runs.end(), [](const Calibration& x, const Calibration& y) {
          return x.microbatch_size < y.microbatch_size;
        })) {
      read.missing("runs", where, "ordered by microbatch_size");
    }
  }
  return fit;
}

}  // namespace

std::string calibration_json(const Calibration& calibration) { return calibration_object(calibration).dump(); }

std::string cost_fit_json(const CostFit& fit) {
  json stages = json::array();
  for (const auto& s : fit.stages) {
    stages.push_back(
        {{"forward", line_json(s[0])}, {"backward_input", line_json(s[1])}, {"backward_weight", line_json(s[2])}});
  }
  json runs = json::array();
  for (const Calibration& run : fit.runs) runs.push_back(calibration_object(run));
  return json{{"p", fit.p},
              {"v", fit.v},
              {"sizes", fit.sizes},
              {"stages", stages},
              {"send", line_json(fit.send)},
              {"receive", line_json(fit.receive)},
              {"link", line_json(fit.link)},
              {"step_overhead", line_json(fit.step_overhead)},
              {"bytes_per_sample", fit.bytes_per_sample},
              {"compute_spread", fit.compute_spread},
              {"transfer_spread", fit.transfer_spread},
              {"receive_spread", fit.receive_spread},
              {"runs", runs}}
      .dump();
}

CostFit read_costs_json(const std::string& text, const std::string& source) {
  if (json_depth(text) > limits::json_depth) {
    throw input_error(
        fmt::format("{}: nests JSON more than {} deep; {}", printable(source), limits::json_depth, writers));
  }
  json document;
  try {
    document = json::parse(text);
  } catch (const json::parse_error& e) {
    throw input_error(fmt::format("{}: not a JSON file (byte {}); {}", printable(source), e.byte, writers));
  } catch (const json::out_of_range&) {
    throw input_error(fmt::format("{}: holds a number beyond the range of a double; {}", printable(source), writers));
  }
  const Reader read(source);
  if (!document.is_object()) read.missing("calibration", "the file", "an object (the file is not a JSON object)");
  if (document.contains("cost_fit")) return read_fit(read.object(document, "cost_fit", "the file"), read);
  if (document.contains("calibration")) {
    const json& c = document["calibration"];
    if (!c.is_object()) read.missing("calibration", "the file", "an object");
    return fit_costs({read_calibration(c, read)});
  }
  throw input_error(fmt::format("{}: holds neither 'calibration' nor 'cost_fit'; {}", printable(source), writers));
}

}  // namespace kpipe::schedule
