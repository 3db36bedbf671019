// TensorSpec, bfloat16 conversion and the type-erased Tensor.
#include <cmath>
#include <limits>

#include "catch.hpp"
#include "kpipe/core/error.hpp"
#include "kpipe/tensor/tensor.hpp"

using namespace kpipe;
using namespace kpipe::tensor;

TEST_CASE("a TensorSpec knows its elements, bytes and printed form", "[tensor][spec]") {
  const TensorSpec spec({32, 16, 64}, DType::float32);
  CHECK(spec.rank() == 3);
  CHECK(spec.elements() == 32 * 16 * 64);
  CHECK(spec.bytes() == 32 * 16 * 64 * 4);
  CHECK(spec.to_string() == "32x16x64 float32");
  CHECK(TensorSpec::matrix<double>(3, 5).to_string() == "3x5 float64");
  CHECK(TensorSpec({7}, DType::bfloat16).bytes() == 14);
  CHECK(TensorSpec({}, DType::float32).to_string() == "scalar float32");
  CHECK(TensorSpec({}, DType::float32).elements() == 1);
  CHECK(spec == TensorSpec::of<float>({32, 16, 64}));
  CHECK(spec != TensorSpec::of<double>({32, 16, 64}));
  CHECK(spec != TensorSpec::of<float>({32, 64, 16}));
  CHECK_THROWS_WITH(TensorSpec({3, -1}, DType::float64),
                    "a tensor of shape [3, -1] has a negative extent; extents must be 0 or more");
  // Extents are compared up to each spec's rank, not over the unused slots.
  CHECK(TensorSpec({3, 0}, DType::float32) != TensorSpec({3, 0, 0}, DType::float32));
  CHECK(TensorSpec(std::vector<std::int64_t>{4, 2}, DType::float32) == TensorSpec::matrix<float>(4, 2));
  CHECK(spec.shape() == std::vector<std::int64_t>{32, 16, 64});
  CHECK_THROWS_WITH(spec.extent(3),
                    "dimension 3 of a tensor of 32x16x64 float32 was asked for; it has dimensions 0 to 2");
  CHECK_THROWS_WITH(TensorSpec({1, 1, 1, 1, 1, 1, 1, 1, 1}, DType::float32),
                    "a tensor of shape [1, 1, 1, 1, 1, 1, 1, 1, 1] has 9 dimensions; at most 8 are allowed");
}

TEST_CASE("bfloat16 rounds to nearest even and converts back exactly", "[tensor][spec]") {
  CHECK(to_float(to_bfloat16(1.0f)) == 1.0f);
  CHECK(to_float(to_bfloat16(-2.5f)) == -2.5f);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties go to the even mantissa.
  CHECK(to_float(to_bfloat16(1.0f + 0x1.0p-8f)) == 1.0f);
  CHECK(to_float(to_bfloat16(1.0f + 0x1.8p-8f)) == 1.0f + 0x1.0p-7f);
  CHECK(std::isnan(to_float(to_bfloat16(std::numeric_limits<float>::quiet_NaN()))));
  CHECK(std::isinf(to_float(to_bfloat16(std::numeric_limits<float>::infinity()))));
}

TEST_CASE("a Tensor wraps a View and hands out typed views of its memory", "[tensor][tensor]") {
  const auto m = uninitialized_matrix<double>("test::m", 3, 4);
  const Tensor t(m);
  CHECK(t.spec() == TensorSpec::matrix<double>(3, 4));
  CHECK(t.bytes() == 96);
  CHECK(m.use_count() == 2);  // the tensor holds the allocation
  CHECK(t.matrix<double>().data() == m.data());
  const auto cube = t.view<double, 2>();
  CHECK(cube.extent(1) == 4);
  CHECK_THROWS_WITH(t.matrix<float>(),
                    "a tensor of 3x4 float64 was read as a rank-2 float32 view; rank and dtype must "
                    "match");
  CHECK_THROWS_WITH((t.view<double, 3>()),
                    "a tensor of 3x4 float64 was read as a rank-3 float64 view; rank and dtype must match");
  const Tensor empty;
  CHECK(empty.empty());
  CHECK(empty.matrix<float>().size() == 0);
  const TensorList list{t, empty};
  CHECK(list.size() == 2);
  CHECK_THROWS_WITH(list.at(2), "tensor 2 of a list of 2 was asked for; positions run from 0 to 1");
}

TEST_CASE("rank-3 Views round-trip through a Tensor", "[tensor][tensor]") {
  View<float, 3> v("test::v", 2, 3, 4);
  const Tensor t(v);
  CHECK(t.spec().to_string() == "2x3x4 float32");
  const auto back = t.view<float, 3>();
  CHECK(back.extent(0) == 2);
  CHECK(back.extent(2) == 4);
  CHECK(back.data() == v.data());
}
