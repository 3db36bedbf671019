// The execution context: its pool reuses buffers once their handles are
// dropped, and its regions and fence run on its instance.
#include "catch.hpp"
#include "kpipe/tensor/allocation_counter.hpp"
#include "kpipe/tensor/exec_context.hpp"

using namespace kpipe;
using namespace kpipe::tensor;

TEST_CASE("a BufferPool reuses a buffer once nobody else holds it", "[tensor][pool]") {
  BufferPool<Matrix<float>> pool("test::pool");
  auto a = pool.take(4, 5);
  const auto b = pool.take(4, 5);
  CHECK(a.data() != b.data());
  CHECK(pool.size() == 2);
  const auto* first = a.data();
  a = {};
  CHECK(pool.take(4, 5).data() == first);
  CHECK(pool.take(5, 4).extent(0) == 5);
  CHECK(pool.size() == 3);
  CHECK(pool.bytes() == 3 * 20 * sizeof(float));
}

TEST_CASE("the context's pool allocates nothing once warm", "[tensor][pool]") {
  ExecContext exec;
  const auto cycle = [&] {
    const auto region = exec.region("test::cycle");
    const auto x = exec.pool().take<float>("test::x", 8, 3);
    const auto y = exec.pool().take<double>("test::x", 8, 3);  // same label, other scalar: another pool
    const auto z = exec.pool().take<float>("test::z", 8, 3);
    Kokkos::deep_copy(exec.space(), x, 1.0f);
    exec.fence();
  };
  cycle();
  CHECK(exec.pool().buffers() == 3);
  AllocationCounter counter;
  counter.start();
  cycle();
  cycle();
  counter.stop();
  CHECK(counter.total().count == 0);
  CHECK(exec.pool().buffers() == 3);
  CHECK(exec.pool().bytes() == 8 * 3 * (4 + 8 + 4));
}
