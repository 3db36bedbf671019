// The allocation counter sees Kokkos allocations through the Tools callback,
// without a tool library loaded.
#include "catch.hpp"
#include "kpipe/core/error.hpp"
#include "kpipe/tensor/allocation_counter.hpp"
#include "kpipe/tensor/matrix.hpp"

using namespace kpipe;
using namespace kpipe::tensor;

TEST_CASE("allocating 3 Views counts 3", "[tensor][allocations]") {
  AllocationCounter counter;
  counter.start();
  {
    const Matrix<double> a("test::a", 3, 4);
    const auto b = uninitialized_matrix<float>("test::b", 2, 2);
    const Kokkos::View<int*, MemorySpace> c("test::c", 5);
    // Copies share an allocation: no count.
    const auto a2 = a;
    CHECK(a2.use_count() == 2);
  }
  counter.stop();
  CHECK(counter.total().count == 3);
  CHECK(counter.total().bytes >= (3 * 4 * 8 + 2 * 2 * 4 + 5 * 4));
  CHECK(counter.by_label().at("test::a").count == 1);
  CHECK(counter.by_label().at("test::b").bytes >= 16);
  CHECK(counter.in(MemorySpace::name()).count == 3);
  CHECK(counter.by_memory_space().size() == 1);

  // Stopped: no more counting, and the counts stay readable.
  const Matrix<double> later("test::later", 2, 2);
  CHECK(counter.total().count == 3);
}

TEST_CASE("only one allocation counter counts at a time", "[tensor][allocations]") {
  AllocationCounter first, second;
  first.start();
  CHECK_THROWS_WITH(second.start(), "an allocation counter is already counting; stop it before starting another");
  first.stop();
  second.start();
  const Matrix<float> m("test::m", 1, 1);
  second.stop();
  CHECK(second.total().count == 1);
  CHECK(first.total().count == 0);
}
