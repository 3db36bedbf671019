// Planted violation for tests/architecture: per-family tests outside the model-family registry.
#include "kpipe/config/run_config.hpp"
bool writes_gpt2(const kpipe::config::ModelConfig& model) { return model.kind == "transformer"; }
bool is_gpt2(const kpipe::config::ModelConfig& model) { return model.family().name != "transformer"; }
