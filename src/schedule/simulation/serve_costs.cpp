#include <array>
#include <cmath>

#include "kpipe/core/error.hpp"
#include "kpipe/schedule/serve_simulate.hpp"

namespace kpipe::schedule {

// The normal equations of cost = fixed + per_token·tokens + per_context·attended,
// each column scaled to unit norm, solved by Gauss-Jordan elimination taking
// the largest remaining diagonal as pivot. A column whose remaining diagonal
// is negligible depends on those already taken and keeps a coefficient of 0.
ServeCosts fit_serve_costs(const std::vector<ServeSample>& samples) {
  if (samples.empty()) throw input_error("no measured microbatch to fit serving costs to; serve at least one request");
  constexpr int n = 3;
  std::array<std::array<double, n + 1>, n> m{};  // [XᵀX | Xᵀy]
  for (const ServeSample& s : samples) {
    const std::array<double, n> x{1.0, static_cast<double>(s.tokens), static_cast<double>(s.attended)};
    for (int i = 0; i < n; ++i) {
      for (int j = 0; j < n; ++j) m[i][j] += x[i] * x[j];
      m[i][n] += x[i] * s.seconds;
    }
  }
  std::array<double, n> norm{};
  for (int i = 0; i < n; ++i) norm[i] = m[i][i] > 0.0 ? std::sqrt(m[i][i]) : 1.0;
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) m[i][j] /= norm[i] * norm[j];
    m[i][n] /= norm[i];
  }
  std::array<bool, n> taken{};
  for (int step = 0; step < n; ++step) {
    int k = -1;
    for (int i = 0; i < n; ++i) {
      if (!taken[i] && (k < 0 || m[i][i] > m[k][k])) k = i;
    }
    if (m[k][k] < 1e-9) break;
    taken[k] = true;
    const double pivot = m[k][k];
    for (double& value : m[k]) value /= pivot;
    for (int i = 0; i < n; ++i) {
      if (i == k) continue;
      const double factor = m[i][k];
      for (int j = 0; j <= n; ++j) m[i][j] -= factor * m[k][j];
    }
  }
  std::array<double, n> c{};
  for (int i = 0; i < n; ++i) c[i] = taken[i] ? m[i][n] / norm[i] : 0.0;
  return {c[0], c[1], c[2]};
}

}  // namespace kpipe::schedule
