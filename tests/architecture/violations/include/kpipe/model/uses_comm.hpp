// Planted violation for tests/architecture: model gets collectives injected, never from comm.
#include "kpipe/comm/collectives.hpp"
