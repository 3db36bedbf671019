#pragma once
// The error measure of the kernel and model tests: max |x - y| / max |y|
// over all elements, in long double, so a float result can be held against
// a double or long double reference; max |x - y| where y is all zero (a
// gradient that vanishes exactly). Nested vectors (one per sequence) count as
// one flat vector.

#include <algorithm>
#include <cmath>
#include <vector>

namespace kpipe::test {

template <class X, class Y>
double relative_error(const std::vector<X>& x, const std::vector<Y>& y) {
  long double diff = 0, size = 0;
  for (std::size_t i = 0; i < std::min(x.size(), y.size()); ++i) {
    diff = std::max(diff, std::abs(static_cast<long double>(x[i]) - static_cast<long double>(y[i])));
    size = std::max(size, std::abs(static_cast<long double>(y[i])));
  }
  return static_cast<double>(size == 0 ? diff : diff / size);
}

template <class X, class Y>
double relative_error(const std::vector<std::vector<X>>& x, const std::vector<std::vector<Y>>& y) {
  std::vector<X> flat_x;
  std::vector<Y> flat_y;
  for (const auto& row : x) flat_x.insert(flat_x.end(), row.begin(), row.end());
  for (const auto& row : y) flat_y.insert(flat_y.end(), row.begin(), row.end());
  return relative_error(flat_x, flat_y);
}

}  // namespace kpipe::test
