#include <vector>

#include "catch.hpp"
#include "kpipe/core/even_sample.hpp"

using namespace kpipe;

// Every multiple of the stride below n: what an even sample of 0 … n-1 must hold.
static std::vector<int> multiples_below(int n, std::size_t stride) {
  std::vector<int> m;
  for (int i = 0; i < n; i += static_cast<int>(stride)) m.push_back(i);
  return m;
}

TEST_CASE("EvenSample keeps every stride-th item of the whole sequence, within its capacity", "[core]") {
  for (const std::size_t capacity : {2, 3, 5, 32}) {
    EvenSample<int> sample(capacity);
    for (int n = 1; n <= 300; ++n) {
      sample.offer(n - 1);
      INFO("capacity " << capacity << ", " << n << " offered");
      CHECK(sample.offered() == static_cast<std::size_t>(n));
      CHECK(sample.items() == multiples_below(n, sample.stride()));
      CHECK(sample.items().size() <= capacity);
      if (static_cast<std::size_t>(n) >= capacity) CHECK(2 * sample.items().size() >= capacity);
    }
  }
}

TEST_CASE("EvenSample spans the sequence, not its end", "[core]") {
  EvenSample<int> sample(32);
  for (int i = 0; i < 1000; ++i) sample.offer(i);
  // 1000 items at capacity 32: stride 32, so 0, 32, …, 992, where keeping the last 32 would start at 968.
  CHECK(sample.stride() == 32);
  REQUIRE(sample.items().size() == 32);
  CHECK(sample.items().front() == 0);
  CHECK(sample.items().back() == 992);
}

TEST_CASE("EvenSample below its capacity keeps everything", "[core]") {
  EvenSample<int> sample(8);
  for (int i = 0; i < 8; ++i) sample.offer(i * 10);
  CHECK(sample.items() == std::vector<int>{0, 10, 20, 30, 40, 50, 60, 70});
  CHECK(sample.stride() == 1);
}
