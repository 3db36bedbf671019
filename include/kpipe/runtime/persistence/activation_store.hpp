#pragma once
// pipeline.activation_store = "hdf5" (DESIGN.md §5, "Activation store"): one
// HDF5 file per rank that holds each microbatch's stash between its F and its
// B, so the stages keep in memory only what the microbatches in their
// backward need. The file is node-local scratch, written and read by this
// rank alone (serial HDF5), and removed when the store is destroyed.
//
// Layout (docs/formats.md, "Activation store"): /chunk<c>/mb<k>/<name>, one
// 2-D dataset per stashed tensor, float32 or float64 as in memory. A
// microbatch id's datasets are rewritten in place every step, so the file
// holds at most m microbatches' stashes per chunk and stops growing after the
// first step.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kpipe/model/stash_store.hpp"
#include "kpipe/tensor/exec_context.hpp"

namespace kpipe::runtime {

// pipeline.activation_path resolved on this rank: itself when set, else
// $TMPDIR when set, else /tmp.
std::string activation_directory(const std::string& configured);

// Throws an input error (exit 2) naming pipeline.activation_path unless
// `directory` is an existing, writable directory.
void require_activation_directory(const std::string& directory);

// What the store moved, summed over its chunks since construction.
struct ActivationTraffic {
  std::uint64_t bytes_written = 0;
  std::uint64_t bytes_read = 0;
  double write_seconds = 0.0;  // device-to-file, including the wait for the forward's kernels
  double read_seconds = 0.0;   // file-to-device
  std::int64_t tensors_written = 0;
  std::int64_t tensors_read = 0;

  double seconds() const { return write_seconds + read_seconds; }
};

class Hdf5ActivationStore {
 public:
  // Creates a private directory <directory>/kpipe-activations-rank<R>-XXXXXX
  // (mkdtemp: mode 0700, a name nobody can predict) and the file
  // activations.h5 in it, exclusively, with one namespace per chunk; removes
  // both when destroyed. Copies run on `exec`'s instance, which must outlive
  // the store.
  Hdf5ActivationStore(const std::string& directory, int world_rank, int chunks, tensor::ExecContext& exec);
  ~Hdf5ActivationStore();
  Hdf5ActivationStore(const Hdf5ActivationStore&) = delete;
  Hdf5ActivationStore& operator=(const Hdf5ActivationStore&) = delete;

  // The store of chunk c, for model::StageOptions::stash_store.
  model::StashStore& chunk(int c);

  const std::string& file_name() const;
  const ActivationTraffic& traffic() const;
  // Bytes of the file on disk now.
  std::uint64_t file_bytes() const;

 private:
  struct State;
  class Chunk;
  std::unique_ptr<State> state_;
  std::vector<std::unique_ptr<Chunk>> chunks_;
};

}  // namespace kpipe::runtime
