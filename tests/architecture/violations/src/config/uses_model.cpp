// Planted violation for tests/architecture: config builds no model.
#include "kpipe/model/spec.hpp"
