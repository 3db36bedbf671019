// Planted violation for tests/architecture: a per-kind test outside the layer-kind registry.
#include "kpipe/model/layer_kind.hpp"
bool caches(const kpipe::model::LayerSpec& spec) { return spec.kind->name == "decoder_block"; }
