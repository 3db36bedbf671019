#pragma once
// A type-erased tensor: device memory of any rank and dtype plus its
// TensorSpec, so that a layer's inputs, outputs and saved tensors can be
// passed and stored as lists whatever their shapes. Typed access creates an
// unmanaged View on the same memory (checked against the spec); the Tensor
// itself keeps the allocation alive, so a pooled buffer held by a Tensor is
// not free (BufferPool's use_count rule).

#include <Kokkos_Core.hpp>

#include <array>
#include <cstddef>
#include <initializer_list>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "kpipe/tensor/matrix.hpp"
#include "kpipe/tensor/spec.hpp"

namespace kpipe::tensor {

namespace detail {
[[noreturn]] void throw_wrong_access(const TensorSpec& spec, int rank, DType dtype);
}

class Tensor {
 public:
  // The empty tensor: no memory, rank 0, zero elements. Passed as a gradient
  // nobody wants (the first stage's input gradient).
  Tensor() = default;

  // Shares `view` (a contiguous LayoutRight View in the default memory space).
  template <class ViewType, class = std::enable_if_t<Kokkos::is_view<ViewType>::value>>
  Tensor(const ViewType& view)  // NOLINT: a View is a Tensor, implicitly
      : owner_(std::make_shared<ViewType>(view)),
        data_(const_cast<std::remove_const_t<typename ViewType::value_type>*>(view.data())),
        spec_(spec_of(view)) {
    static_assert(std::is_same<typename ViewType::array_layout, Kokkos::LayoutRight>::value,
                  "a kpipe Tensor wraps LayoutRight Views only (tensor::View, tensor::Matrix)");
    static_assert(std::is_same<typename ViewType::memory_space, MemorySpace>::value,
                  "a kpipe Tensor wraps Views in the default execution space's memory only");
  }

  const TensorSpec& spec() const { return spec_; }
  bool empty() const { return data_ == nullptr || spec_.elements() == 0; }
  std::size_t bytes() const { return owner_ ? spec_.bytes() : 0; }
  void* data() const { return data_; }

  // A rows x cols view; throws unless the tensor is a rank-2 Scalar tensor.
  // An empty tensor gives an empty Matrix.
  template <class Scalar>
  Matrix<Scalar> matrix() const {
    if (!owner_) return {};
    check(2, dtype_of<Scalar>());
    return Matrix<Scalar>(static_cast<Scalar*>(data_), spec_.extent(0), spec_.extent(1));
  }

  // The same memory (and ownership) under another shape of the same dtype and
  // element count: a rows x (T·dim) boundary activation seen as (rows·T) x
  // dim positions. Throws a runtime error naming both shapes otherwise. The
  // empty tensor stays empty.
  Tensor reshaped(const TensorSpec& spec) const;

  // An unmanaged View of any rank; throws unless rank and dtype match.
  template <class Scalar, int Rank>
  View<Scalar, Rank> view() const {
    check(Rank, dtype_of<Scalar>());
    typename View<Scalar, Rank>::array_layout layout;
    for (int d = 0; d < Rank; ++d) layout.dimension[d] = static_cast<std::size_t>(spec_.extent(d));
    return View<Scalar, Rank>(static_cast<Scalar*>(data_), layout);
  }

 private:
  template <class ViewType>
  static TensorSpec spec_of(const ViewType& view) {
    std::array<std::int64_t, static_cast<std::size_t>(ViewType::rank)> shape{};
    for (std::size_t d = 0; d < shape.size(); ++d) shape[d] = static_cast<std::int64_t>(view.extent(d));
    return TensorSpec::of<std::remove_const_t<typename ViewType::value_type>>(shape);
  }

  void check(int rank, DType dtype) const {
    if (spec_.rank() != rank || spec_.dtype() != dtype) detail::throw_wrong_access(spec_, rank, dtype);
  }

  std::shared_ptr<const void> owner_;
  void* data_ = nullptr;
  TensorSpec spec_;
};

// A read-only list of tensors that does not own them, like std::span<const
// Tensor> (C++17 has none): valid while the vector or braced list it views is.
class TensorList {
 public:
  TensorList() = default;
  TensorList(const Tensor* first, std::size_t size) : first_(first), size_(size) {}
  TensorList(const std::vector<Tensor>& tensors) : first_(tensors.data()), size_(tensors.size()) {}  // NOLINT
// A braced list lives until the end of the full expression that contains the
// call, as for std::span's (C++26) constructor from one: pass, do not store.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Winit-list-lifetime"
#endif
  TensorList(std::initializer_list<Tensor> tensors)  // NOLINT: implicit, like a span
      : first_(tensors.begin()), size_(tensors.size()) {}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const Tensor& operator[](std::size_t i) const { return first_[i]; }
  // Like operator[] but throws an error naming the position when out of range.
  const Tensor& at(std::size_t i) const;
  const Tensor* begin() const { return first_; }
  const Tensor* end() const { return first_ + size_; }

 private:
  const Tensor* first_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace kpipe::tensor
