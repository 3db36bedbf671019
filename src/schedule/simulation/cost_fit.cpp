#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "kpipe/core/error.hpp"
#include "kpipe/schedule/calibration.hpp"

namespace kpipe::schedule {

namespace {

constexpr double smallest_cost = 1e-9;  // seconds: the simulator takes positive compute costs only

double seconds_per_byte(const Calibration& c) { return c.link_bandwidth > 0.0 ? 1.0 / c.link_bandwidth : 0.0; }

// The costs at b between the measured sizes of `lo` and `hi`, each one
// linear in b between them; the link by its latency and seconds per byte.
Calibration between(const Calibration& lo, const Calibration& hi, int b, const CostFit& fit) {
  const double t = static_cast<double>(b - lo.microbatch_size) / (hi.microbatch_size - lo.microbatch_size);
  const auto mix = [t](double x, double y) { return x + t * (y - x); };
  Calibration c;
  c.p = fit.p;
  c.v = fit.v;
  c.microbatch_size = b;
  for (std::size_t s = 0; s < lo.stages.size(); ++s) {
    const StageCosts &x = lo.stages[s], &y = hi.stages[s];
    c.stages.push_back({mix(x.forward, y.forward), mix(x.backward_input, y.backward_input),
                        mix(x.backward_weight, y.backward_weight)});
  }
  c.send_seconds = mix(lo.send_seconds, hi.send_seconds);
  c.receive_seconds = mix(lo.receive_seconds, hi.receive_seconds);
  c.bytes_per_transfer = std::llround(mix(static_cast<double>(lo.bytes_per_transfer), hi.bytes_per_transfer));
  c.link_latency = mix(lo.link_latency, hi.link_latency);
  const double per_byte = mix(seconds_per_byte(lo), seconds_per_byte(hi));
  c.link_bandwidth = per_byte > 0.0 ? 1.0 / per_byte : 0.0;
  c.step_overhead = mix(lo.step_overhead, hi.step_overhead);
  c.compute_spread = fit.compute_spread;
  c.transfer_spread = fit.transfer_spread;
  c.receive_spread = fit.receive_spread;
  return c;
}

}  // namespace

LinearCost fit_line(const std::vector<double>& x, const std::vector<double>& y, bool proportional) {
  const std::size_t n = std::min(x.size(), y.size());
  if (n == 0) return {};
  // Relative residuals (weights 1/y²): a size whose step takes 1 ms counts as much as one that takes 100 ms,
  // so the fixed cost, which matters most at small b, is not lost under the large ones.
  std::vector<double> w(n, 1.0);
  for (std::size_t i = 0; i < n; ++i) {
    if (y[i] > 0.0) w[i] = 1.0 / (y[i] * y[i]);
  }
  double sw = 0.0, mx = 0.0, my = 0.0;
  for (std::size_t i = 0; i < n; ++i) {
    sw += w[i];
    mx += w[i] * x[i];
    my += w[i] * y[i];
  }
  mx /= sw;
  my /= sw;
  double sxx = 0.0, sxy = 0.0;
  for (std::size_t i = 0; i < n; ++i) {
    sxx += w[i] * (x[i] - mx) * (x[i] - mx);
    sxy += w[i] * (x[i] - mx) * (y[i] - my);
  }
  // One distinct size: a line through the origin or a flat one, as the caller knows which is likelier.
  if (!(sxx > 1e-12 * sw * std::max(1.0, mx * mx))) {
    if (proportional && mx > 0.0) return {0.0, my / mx};
    return {my, 0.0};
  }
  const double slope = sxy / sxx;
  return {my - slope * mx, slope};
}

CostFit fit_costs(const std::vector<Calibration>& runs) {
  if (runs.empty()) throw input_error("no run to fit costs to; measure at least one microbatch size");
  CostFit fit;
  fit.p = runs.front().p;
  fit.v = runs.front().v;
  const std::size_t stages = static_cast<std::size_t>(fit.p) * fit.v;
  std::vector<double> b, send, receive, link, overhead;
  for (const Calibration& run : runs) {
    if (run.p != fit.p || run.v != fit.v || run.stages.size() != stages || run.microbatch_size < 1) {
      throw input_error(fmt::format(
          "cannot fit costs of different pipelines together (p = {}, v = {} and p = {}, v = {}); calibrate each "
          "pipeline shape on its own",
          fit.p, fit.v, run.p, run.v));
    }
    b.push_back(run.microbatch_size);
    fit.sizes.push_back(run.microbatch_size);
    send.push_back(run.send_seconds);
    receive.push_back(run.receive_seconds);
    link.push_back(run.link_latency +
                   (run.link_bandwidth > 0.0 ? static_cast<double>(run.bytes_per_transfer) / run.link_bandwidth : 0.0));
    overhead.push_back(run.step_overhead);
    fit.bytes_per_sample += static_cast<double>(run.bytes_per_transfer) / run.microbatch_size / runs.size();
  }
  for (std::size_t s = 0; s < stages; ++s) {
    std::array<std::vector<double>, 3> y;
    for (const Calibration& run : runs) {
      y[0].push_back(run.stages[s].forward);
      y[1].push_back(run.stages[s].backward_input);
      y[2].push_back(run.stages[s].backward_weight);
    }
    fit.stages.push_back({fit_line(b, y[0], true), fit_line(b, y[1], true), fit_line(b, y[2], true)});
  }
  fit.send = fit_line(b, send, false);
  fit.receive = fit_line(b, receive, false);
  fit.link = fit_line(b, link, false);
  fit.step_overhead = fit_line(b, overhead, false);
  std::vector<double> compute, transfer, receive_factors;
  for (const Calibration& run : runs) {
    compute.insert(compute.end(), run.compute_spread.begin(), run.compute_spread.end());
    transfer.insert(transfer.end(), run.transfer_spread.begin(), run.transfer_spread.end());
    receive_factors.insert(receive_factors.end(), run.receive_spread.begin(), run.receive_spread.end());
  }
  fit.compute_spread = spread_factors(compute);
  fit.transfer_spread = spread_factors(transfer);
  fit.receive_spread = spread_factors(receive_factors);
  fit.runs = runs;
  std::stable_sort(fit.runs.begin(), fit.runs.end(),
                   [](const Calibration& x, const Calibration& y) { return x.microbatch_size < y.microbatch_size; });
  return fit;
}

Calibration CostFit::at(int b) const {
  const auto above = std::lower_bound(runs.begin(), runs.end(), b,
                                      [](const Calibration& run, int size) { return run.microbatch_size < size; });
  if (above != runs.end() && above->microbatch_size == b) return *above;
  if (above != runs.begin() && above != runs.end()) return between(*(above - 1), *above, b, *this);
  Calibration c;
  c.p = p;
  c.v = v;
  c.microbatch_size = b;
  for (const auto& stage : stages) {
    c.stages.push_back({std::max(smallest_cost, stage[0].at(b)), std::max(smallest_cost, stage[1].at(b)),
                        std::max(smallest_cost, stage[2].at(b))});
  }
  c.send_seconds = std::max(0.0, send.at(b));
  c.receive_seconds = std::max(0.0, receive.at(b));
  c.bytes_per_transfer = std::llround(bytes_per_sample * b);
  // The link line is latency + bytes / bandwidth with bytes ∝ b.
  c.link_latency = std::max(0.0, link.fixed);
  c.link_bandwidth = link.per_sample > 0.0 ? bytes_per_sample / link.per_sample : 0.0;
  c.step_overhead = std::max(0.0, step_overhead.at(b));
  c.compute_spread = compute_spread;
  c.transfer_spread = transfer_spread;
  c.receive_spread = receive_spread;
  return c;
}

}  // namespace kpipe::schedule
