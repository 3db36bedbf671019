// Planted violation for tests/architecture: the schedule IR knows no executor.
#include "kpipe/runtime/execution/executor.hpp"
