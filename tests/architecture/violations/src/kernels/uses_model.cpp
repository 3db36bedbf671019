// Planted violation for tests/architecture: kernels know no layers.
#include "kpipe/model/layer.hpp"
