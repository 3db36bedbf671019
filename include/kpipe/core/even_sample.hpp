#pragma once
// A bounded sample spread evenly over a sequence of unknown length: of the
// items offered in order, it keeps every `stride`-th (0, s, 2s, …), and when
// `capacity` are kept it drops every other one and doubles the stride. So at
// any time it holds between capacity/2 and capacity items drawn uniformly
// from the whole sequence so far, not just its end, in memory that does not
// grow with the sequence. Which items are kept depends only on their indices,
// so ranks that offer the same sequence keep the same items.

#include <cstddef>
#include <utility>
#include <vector>

namespace kpipe {

template <class T>
class EvenSample {
 public:
  // capacity >= 2 (a smaller one is taken as 2).
  explicit EvenSample(std::size_t capacity) : capacity_(capacity < 2 ? 2 : capacity) {}

  // Offers the next item of the sequence; keeps it when its index is a multiple of the stride.
  void offer(T item) {
    const std::size_t index = offered_++;
    if (index % stride_ != 0) return;
    if (kept_.size() == capacity_) {
      // Keep indices 0, 2s, 4s, …: every other kept item, then take the new stride.
      std::size_t to = 0;
      for (std::size_t from = 0; from < kept_.size(); from += 2) kept_[to++] = std::move(kept_[from]);
      kept_.resize(to);
      stride_ *= 2;
      if (index % stride_ != 0) return;
    }
    kept_.push_back(std::move(item));
  }

  const std::vector<T>& items() const { return kept_; }
  std::size_t stride() const { return stride_; }    // distance between kept items' indices
  std::size_t offered() const { return offered_; }  // items offered so far

 private:
  std::size_t capacity_;
  std::size_t stride_ = 1;
  std::size_t offered_ = 0;
  std::vector<T> kept_;
};

}  // namespace kpipe
