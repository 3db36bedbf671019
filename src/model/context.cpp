#include "kpipe/model/layer.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <stdexcept>

#include "kpipe/core/error.hpp"

namespace kpipe::model {

void not_row_wise(const char* kind) {
  throw std::logic_error(fmt::format("a {} layer is not row-wise: its rows cannot be computed apart", kind));
}

void Context::save(const std::string& name, tensor::Tensor tensor) {
  for (auto& entry : saved_) {
    if (entry.first == name) {
      entry.second = std::move(tensor);
      return;
    }
  }
  saved_.emplace_back(name, std::move(tensor));
}

const tensor::Tensor& Context::saved(const std::string& name) const {
  for (const auto& entry : saved_) {
    if (entry.first == name) return entry.second;
  }
  std::vector<std::string> names;
  for (const auto& entry : saved_) names.push_back(entry.first);
  throw runtime_error(
      fmt::format("no saved tensor \"{}\" in this layer's context; it holds [{}]", name, fmt::join(names, ", ")));
}

bool Context::has(const std::string& name) const {
  return std::any_of(saved_.begin(), saved_.end(), [&](const auto& entry) { return entry.first == name; });
}

void Context::drop(const std::string& name) {
  saved_.erase(std::remove_if(saved_.begin(), saved_.end(), [&](const auto& entry) { return entry.first == name; }),
               saved_.end());
}

void Context::clear() {
  saved_.clear();
  for (auto& child : children) child.clear();
}

void Context::reset_children(std::size_t count) {
  children.resize(count);
  for (auto& child : children) child.clear();
}

std::vector<TensorDecl> Context::saved_specs() const {
  std::vector<TensorDecl> specs;
  for (const auto& entry : saved_) specs.push_back({entry.first, entry.second.spec()});
  return specs;
}

std::size_t Context::bytes() const {
  std::size_t total = 0;
  for (const auto& entry : saved_) total += entry.second.bytes();
  for (const auto& child : children) total += child.bytes();
  return total;
}

}  // namespace kpipe::model
