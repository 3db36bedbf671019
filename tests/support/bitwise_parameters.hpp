#pragma once
// The MPI training tests' bitwise check: every parameter a rank holds against
// the reference's parameter of the same name.

#include <map>
#include <string>
#include <vector>

#include "catch.hpp"
#include "kpipe/model/layer.hpp"

namespace kpipe::test {

inline std::map<std::string, std::vector<float>> by_name(const std::vector<model::Parameter<float>>& parameters) {
  std::map<std::string, std::vector<float>> values;
  for (const auto& p : parameters) values[p.name] = model::parameters_to_host(std::vector<model::Parameter<float>>{p});
  return values;
}

// Every parameter this rank holds equals the reference's of the same name, bitwise.
inline void check_bitwise(const std::vector<model::Parameter<float>>& reference,
                          const std::vector<model::Parameter<float>>& pipelined) {
  const auto expected = by_name(reference);
  const auto actual = by_name(pipelined);
  CHECK(!actual.empty());
  for (const auto& [name, values] : actual) {
    INFO(name);
    // CHECK, never REQUIRE: a rank leaving early would strand the others in MPI.
    CHECK(expected.count(name) == 1);
    if (expected.count(name) == 1) CHECK(values == expected.at(name));  // bitwise: float ==
  }
}

}  // namespace kpipe::test
