#pragma once
// The MPI datatype of a scalar type.

#include <mpi.h>

namespace kpipe::comm {

template <class Scalar>
MPI_Datatype mpi_type();
template <>
inline MPI_Datatype mpi_type<float>() {
  return MPI_FLOAT;
}
template <>
inline MPI_Datatype mpi_type<double>() {
  return MPI_DOUBLE;
}

template <>
inline MPI_Datatype mpi_type<int>() {
  return MPI_INT;
}

}  // namespace kpipe::comm
