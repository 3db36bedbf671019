// Planted violation for tests/architecture: kernels take their own choices, not the deck's.
#include "kpipe/config/run_config.hpp"
