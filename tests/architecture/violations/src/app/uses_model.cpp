// Planted violations for tests/architecture: app is a command layer over runtime.
#include "kpipe/io/profile.hpp"
#include "kpipe/model/training/trainer.hpp"
#include "kpipe/runtime/execution/pipeline.hpp"
