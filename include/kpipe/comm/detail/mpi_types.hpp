#pragma once
// The MPI datatype of a scalar type.

#include <mpi.h>

#include "kpipe/tensor/spec.hpp"

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

// bfloat16 and float16 travel as their bits: MPI has no such types, and
// nothing reduces them on the way.
template <>
inline MPI_Datatype mpi_type<tensor::BFloat16>() {
  return MPI_UINT16_T;
}
template <>
inline MPI_Datatype mpi_type<tensor::Half>() {
  return MPI_UINT16_T;
}

}  // namespace kpipe::comm
