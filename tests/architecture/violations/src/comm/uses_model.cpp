// Planted violation for tests/architecture: comm moves bytes, it knows no layers.
#include "kpipe/model/collectives.hpp"
