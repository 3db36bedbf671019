#include "catch.hpp"
#include "kpipe/kernels/accuracy.hpp"

using namespace kpipe::kernels;
using namespace kpipe::tensor;

TEST_CASE("count_correct counts rows whose argmax is the label", "[kernels]") {
  // Row i's largest logit is at column (i * 3) % 4; ties go to the first column.
  const int rows = 9, classes = 4;
  Matrix<double> logits("logits", rows, classes);
  Labels labels("labels", rows);
  auto host_logits = Kokkos::create_mirror_view(logits);
  auto host_labels = Kokkos::create_mirror_view(labels);
  int expected = 0;
  for (int i = 0; i < rows; ++i) {
    for (int j = 0; j < classes; ++j) host_logits(i, j) = j == (i * 3) % 4 ? 2.0 : -1.0 * j;
    host_labels(i) = i % 2 == 0 ? (i * 3) % 4 : (i * 3 + 1) % 4;  // even rows right, odd rows wrong
    expected += i % 2 == 0;
  }
  host_logits(0, 1) = 2.0;  // a tie with column 0: argmax stays 0, row 0's label is 0
  Kokkos::deep_copy(logits, host_logits);
  Kokkos::deep_copy(labels, host_labels);
  CHECK(count_correct<double>(ExecutionSpace(), logits, labels) == expected);
}

TEST_CASE("count_correct rejects a label count that does not match the rows", "[kernels]") {
  const Matrix<float> logits("logits", 3, 2);
  const Labels labels("labels", 2);
  CHECK_THROWS_WITH(count_correct<float>(ExecutionSpace(), logits, labels),
                    "2 labels for 3x2 logits; give one label per row");
}
