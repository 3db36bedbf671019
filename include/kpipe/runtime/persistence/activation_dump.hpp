#pragma once
// debug.dump_steps (DESIGN.md §5, "Activation dumps"): the stage-boundary
// activations and gradients of chosen steps and microbatches, one HDF5 file
// per rank, activations-rank<world rank>.h5 in debug.dump_path, written as the
// step runs (serial HDF5: no rank waits for another). Layout in
// docs/formats.md, "Activation dumps".

#include <string>

#include "kpipe/config/run_config.hpp"
#include "kpipe/io/hdf5.hpp"
#include "kpipe/tensor/exec_context.hpp"
#include "kpipe/tensor/matrix.hpp"

namespace kpipe::runtime {

// Where the rank's dump goes: <debug.dump_path>/activations-rank<world_rank>.h5.
std::string dump_file_name(const config::DebugConfig& debug, int world_rank);

class ActivationDump {
 public:
  // Creates (replaces) the rank's file; root attributes name the rank's place.
  ActivationDump(const config::DebugConfig& debug, int world_rank, int pipeline_rank, int replica);

  bool wanted(int step, int mb) const;
  // Writes /step<step>/mb<mb>/stage<stage>/<what> when (step, mb) is wanted.
  // Waits for the kernels that wrote `tensor` (a host copy).
  template <class Scalar>
  void record(const char* what, int step, int mb, int stage, const tensor::ConstMatrix<Scalar>& tensor);

  const std::string& file_name() const { return file_.file_name(); }

 private:
  io::hdf5::Group group(io::hdf5::Group& parent, const std::string& name);

  config::DebugConfig debug_;
  io::hdf5::File file_;
};

}  // namespace kpipe::runtime
