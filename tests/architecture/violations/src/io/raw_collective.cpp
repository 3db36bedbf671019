// Planted violation for tests/architecture: an MPI collective of io's own.
#include <mpi.h>
void sum(MPI_Comm comm, double* x) { MPI_Allreduce(MPI_IN_PLACE, x, 1, MPI_DOUBLE, MPI_SUM, comm); }
