#pragma once
// Model checkpoints (DESIGN.md §5, layout in docs/formats.md): one HDF5 file
// per checkpoint, step-<N>.h5, laid out by the global parameter names
// ("layer3.weight"), never by rank, so a run restarts on any p, v or d.
//
//   /                  attributes: format, format_version, software,
//                      software_version, schema_version, step, data_cursor,
//                      optimizer_steps, deck, stages, virtual_stages,
//                      data_parallel, schedule, in fp16 runs loss_scale,
//                      loss_scale_good_steps and loss_scale_hysteresis, and
//                      xxh3_64 (format 1.1: fnv1a64), the checksum of the
//                      step, cursor, layout, loss scale and deck
//   /parameters/NAME   2-D dataset per parameter
//   /optimizer/NAME    2-D dataset per optimizer state tensor
//                      (each dataset: attribute xxh3_64, the checksum of its bytes)
//
// Writing is collective (parallel HDF5): every rank creates every object,
// each rank writes the tensors it holds, to a unique temporary name that rank
// 0 renames once the file is complete and synced (AMReX's habit), so a crash
// never destroys the previous checkpoint. Reading is per rank: each rank opens
// the file read-only and takes the tensors it holds by name.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kpipe/io/shared_file.hpp"
#include "kpipe/tensor/matrix.hpp"

namespace kpipe::io {

inline constexpr const char* checkpoint_format = "kpipe-checkpoint";
// 1.1.0: the root attributes a restart uses carry a checksum; 1.0.0 files
// (without it) are still read. 1.2.0: the checksums are XXH3-64 (attribute
// xxh3_64) instead of FNV-1a 64 (fnv1a64), which 1.0 and 1.1 files keep.
// 1.3.0: fp16 runs add the loss scaler's state to the root attributes.
inline constexpr const char* checkpoint_format_version = "1.3.0";
// Bumped when the layout changes incompatibly; a reader refuses other values.
inline constexpr std::int64_t checkpoint_schema_version = 1;

// An fp16 run's loss scaler (model::LossScaler::State), so that a restart
// scales as the uninterrupted run would.
struct LossScaleState {
  double scale = 1;
  std::int64_t good_steps = 0;
  std::int64_t hysteresis_left = 0;
};

// The root attributes besides the format's own.
struct CheckpointInfo {
  std::int64_t step = 0;             // optimizer steps done; the run continues with step `step` (0-based)
  std::int64_t optimizer_steps = 0;  // the optimizer's update count (AdamW bias correction)
  std::string deck;                  // the resolved deck text
  int stages = 1;                    // the layout that wrote it (informational: any layout may read it)
  int virtual_stages = 1;
  int data_parallel = 1;
  std::string schedule;
  std::optional<LossScaleState> loss_scale;  // fp16 runs only
  std::string software_version;              // filled by the writer, read back by the reader
};

// A tensor this rank holds, by its global name.
template <class Scalar>
struct NamedMatrix {
  std::string name;
  tensor::Matrix<Scalar> value;
};

// The checksum kpipe stores per dataset and over the root attributes: XXH3
// 64-bit (xxHash) of `size` bytes. Files of format 1.0 and 1.1 carry FNV-1a
// 64 (attribute fnv1a64), which the reader still verifies.
std::uint64_t checksum64(const void* data, std::size_t size);

// "<directory>/step-<step>.h5".
std::string checkpoint_file(const std::string& directory, std::int64_t step);

// The step-<N>.h5 files of `directory` that kpipe wrote (its format attribute
// at the root), oldest first; other files of that name are not kpipe's and
// are left out. Nothing is verified beyond the attribute.
struct CheckpointFile {
  std::int64_t step = 0;
  std::string path;
};
std::vector<CheckpointFile> kpipe_checkpoints(const std::string& directory);
// Every regular step-<N>.h5 file of `directory`, oldest first, whoever wrote
// it: checkpoint.restart = "latest" tries them newest first and says why it
// skips one (torn, damaged, another program's).
std::vector<CheckpointFile> step_checkpoints(const std::string& directory);
// Whether `path` starts as every kpipe checkpoint does, torn or whole:
// HDF5's signature at offset 0 (kpipe writes no user block). Reads 8 bytes,
// so a directory of many foreign step files is sorted out without opening
// each with libhdf5.
bool starts_as_checkpoint(const std::string& path);
// The step-<N>.h5.tmp-XXXXXX files of `directory`: writes a job ended inside
// (killed, or its node lost). kpipe never removes them: another job may be
// writing one now.
std::vector<std::string> unfinished_checkpoints(const std::string& directory);

// Collective over `ranks`: writes step-<info.step>.h5 into `directory` and
// returns its path (on every rank). Each rank passes the tensors it writes
// (ranks of other data-parallel replicas pass empty lists); a name must be
// held by one rank only. Afterwards rank 0 removes the oldest of kpipe's
// checkpoints up to this step beyond the last `keep` (kpipe_checkpoints;
// later steps and files kpipe did not write stay). Throws a runtime error on
// every rank when the file cannot be written; `fault_rank` is the world rank
// the test-only fault hook (KPIPE_FAULT=RANK:checkpoint) compares against.
// `deadline_seconds` (0: none) is how long the caller lets this rank's write
// take before a watchdog ends the job; a write that took longer than the
// shortest rank's is not published (a peer is ending the job by then).
template <class Scalar>
std::string write_checkpoint(const SharedFileRanks& ranks, const std::string& directory, const CheckpointInfo& info,
                             const std::vector<NamedMatrix<Scalar>>& parameters,
                             const std::vector<NamedMatrix<Scalar>>& optimizer_state, int keep, int fault_rank,
                             double deadline_seconds = 0.0);

// What a reader must find in a checkpoint: every parameter of the whole model
// by name and shape (the same list on every rank), and this rank's tensors.
struct ModelShape {
  std::string name;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
};

// Collective over `ranks`: the union of every rank's `mine`, sorted by name
// (ranks that hold the same tensor, data-parallel replicas, list it alike).
std::vector<ModelShape> all_model_shapes(const SharedFileRanks& ranks, const std::vector<ModelShape>& mine);

// The deck attribute of kpipe checkpoint `file` (format and schema checked;
// read_checkpoint verifies its checksum), to learn the model before reading it.
std::string checkpoint_deck(const std::string& file);

// Per rank, no communication: opens `file` read-only, checks the format and
// schema version, checks that its parameters are exactly `model` (one line
// naming the first difference otherwise), loads `parameters` and
// `optimizer_state` by name (pass an empty optimizer list to load weights
// only) and verifies their checksums, and those of its round-robin share
// (`share`, `shares`) of the optimizer state it does not load. Every
// parameter of `model` must be in some rank's `parameters`: the ranks then
// verify every checksum in the file together. Every failure is an input
// error naming the file; nothing is written. Returns the root attributes.
template <class Scalar>
CheckpointInfo read_checkpoint(const std::string& file, const std::vector<ModelShape>& model,
                               const std::vector<NamedMatrix<Scalar>>& parameters,
                               const std::vector<NamedMatrix<Scalar>>& optimizer_state, int share = 0, int shares = 1);

}  // namespace kpipe::io
