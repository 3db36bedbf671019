// Planted violations for tests/architecture: MPI outside comm.
#include <mpi.h>
double now() { return MPI_Wtime(); }
