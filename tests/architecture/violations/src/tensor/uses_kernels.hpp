// Planted violation for tests/architecture: tensors sit below the kernels.
#include "kpipe/kernels/gemm.hpp"
