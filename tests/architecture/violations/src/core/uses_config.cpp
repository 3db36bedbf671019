// Planted violation for tests/architecture: core uses nothing of kpipe.
#include "kpipe/config/run_config.hpp"
