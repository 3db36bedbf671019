// Planted violation for tests/architecture: a model header that includes the deck.
#include "kpipe/config/deck.hpp"
