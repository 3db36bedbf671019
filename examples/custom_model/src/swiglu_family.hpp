#pragma once
// The "swiglu_mlp" model family: model.kind = "swiglu_mlp" is a residual MLP
// of SwiGLU blocks (swiglu.hpp) with a deck key of its own,
// model.swiglu_hidden, the blocks' intermediate width (Llama's
// intermediate_size), instead of a multiple of the width.

#include "kpipe/config/model_family.hpp"

namespace custom {

kpipe::config::ModelFamily swiglu_mlp_family();

}  // namespace custom
