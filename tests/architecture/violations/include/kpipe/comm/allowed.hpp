// Not a violation: comm's headers may name MPI types.
#include <mpi.h>
using Communicator = MPI_Comm;
