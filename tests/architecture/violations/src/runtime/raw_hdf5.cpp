// Planted violation for tests/architecture: HDF5 outside io.
#include <hdf5.h>
long open(const char* path) { return H5Fopen(path, 0, 0); }
