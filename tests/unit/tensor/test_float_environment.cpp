// Subnormals are flushed on every thread kpipe computes on (the test's main
// ran tensor::compat::initialize, as kpipe, its tests and benchmarks do).

#include <limits>
#include <string>
#include <thread>

#include "catch.hpp"
#include "kpipe/tensor/compat.hpp"
#include "kpipe/tensor/float_environment.hpp"

namespace {

// 1e-40 x 1: a subnormal product, or 0 when flushed. volatile keeps the
// compiler from folding it at compile time, where the mode does not apply.
float subnormal_product() {
  volatile float tiny = 1e-40f;
  volatile float one = 1.0f;
  return tiny * one;
}

}  // namespace

TEST_CASE("subnormals are flushed to zero on the main thread and on threads started later", "[tensor]") {
#if defined(__x86_64__) || defined(__aarch64__)
  CHECK(kpipe::tensor::subnormal_mode().find("flushed to zero") != std::string::npos);
  CHECK(subnormal_product() == 0.0f);
  float on_thread = -1.0f;
  std::thread([&] { on_thread = subnormal_product(); }).join();
  CHECK(on_thread == 0.0f);
#else
  CHECK(kpipe::tensor::subnormal_mode().find("kept") != std::string::npos);
  CHECK(subnormal_product() > 0.0f);
#endif
  // Normal numbers are untouched: the smallest normal float times 1 is itself.
  volatile float smallest = std::numeric_limits<float>::min();
  CHECK(smallest * 1.0f == std::numeric_limits<float>::min());
}
