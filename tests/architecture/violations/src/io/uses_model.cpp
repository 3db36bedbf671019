// Planted violation for tests/architecture: io stores tensors, it builds no model.
#include "kpipe/model/parameter.hpp"
