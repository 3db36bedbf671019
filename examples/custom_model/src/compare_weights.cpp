// compare_weights A.h5 B.h5 [TOLERANCE]: whether two kpipe checkpoints hold
// the same weights (every /parameters dataset), bitwise or within a relative
// tolerance (max |a - b| / max |a| per parameter); the example's checks use it. Reads the files through kpipe's
// own HDF5 layer. Exit code 0 when they agree, 1 naming the first difference,
// 2 for an unreadable file or argument.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "kpipe/core/error.hpp"
#include "kpipe/io/hdf5.hpp"

namespace {

// How far b's values of `name` are from a's: 0 when bitwise equal, else
// max |a - b| / max |a| (kpipe's tests' measure), infinite for another shape.
double difference(const kpipe::io::hdf5::Group& a, const kpipe::io::hdf5::Group& b, const std::string& name) {
  const auto x = a.open_dataset(name).read<float>(), y = b.open_dataset(name).read<float>();
  if (x.size() != y.size()) return HUGE_VAL;
  double largest = 0, size = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    largest = std::max(largest, std::abs(double(x[i]) - double(y[i])));
    size = std::max(size, std::abs(double(x[i])));
  }
  return size == 0 ? largest : largest / size;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3 && argc != 4) {
    std::fprintf(stderr, "usage: compare_weights A.h5 B.h5 [TOLERANCE]\n");
    return 2;
  }
  try {
    const double tolerance = argc == 4 ? std::stod(argv[3]) : 0.0;
    const auto first = kpipe::io::hdf5::File::open(argv[1]), second = kpipe::io::hdf5::File::open(argv[2]);
    const auto a = first.open_group("parameters"), b = second.open_group("parameters");
    if (a.names() != b.names()) {
      std::printf("the files hold different parameters\n");
      return 1;
    }
    double largest = 0;
    std::string worst;
    for (const std::string& name : a.names()) {
      const double found = difference(a, b, name);
      if (found > largest) largest = found, worst = name;
    }
    if (largest > tolerance) {
      std::printf("%s differs by %.3g (relative), more than %.3g\n", worst.c_str(), largest, tolerance);
      return 1;
    }
    std::printf("%zu parameters agree (largest relative difference %.3g)\n", a.names().size(), largest);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "compare_weights: %s\n", e.what());
    return 2;
  }
}
