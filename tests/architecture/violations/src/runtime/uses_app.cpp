// Planted violation for tests/architecture: nothing below app uses the command line.
#include "kpipe/app/main.hpp"
