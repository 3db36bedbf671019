#pragma once
// The one conversion from a resolved deck to the typed RunConfig
// (DESIGN.md §1, §2): every value converted, every cross-key rule checked,
// here and nowhere else.

#include <string>
#include <vector>

#include "kpipe/config/deck.hpp"
#include "kpipe/config/run_config.hpp"

namespace kpipe::config {

// The deck as typed structs; RunConfig::layers counts the partitionable
// layers (mlp: one Linear per hidden width plus the output layer;
// residual_mlp: an input projection, one block per hidden width and an output
// layer). Throws an input error that prints the numbers and
// a valid alternative; advice that is not an error goes to `warnings`.
RunConfig run_config(const Deck& deck, std::vector<std::string>* warnings = nullptr);

}  // namespace kpipe::config
