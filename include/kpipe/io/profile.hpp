#pragma once
// Profiles (DESIGN.md §5): every action each rank executed in every step of a
// run, the simulator's prediction for the same plan with the measured
// per-stage costs, and the run's metadata, in one HDF5 file that h5dump and
// h5py read. The layout is documented in docs/formats.md, "Profile".
//
// The io module knows nothing of schedules: action kinds are small integer
// codes here, named by Profile::kind_names (the schedule IR's names, stored
// with the file), so that readers need no table of their own.

#include <cstdint>
#include <string>
#include <vector>

namespace kpipe::io {

inline constexpr const char* profile_format = "kpipe-profile";
inline constexpr const char* profile_format_version = "1.0.0";

// Actions as columns, one row per action, as the file stores them.
struct ActionTable {
  std::vector<std::int32_t> rank;        // world rank = replica · p + pipeline rank
  std::vector<std::int32_t> step;        // training step; -1 in the prediction
  std::vector<std::int32_t> index;       // position in the rank's action list
  std::vector<std::int32_t> kind;        // code into Profile::kind_names
  std::vector<std::int32_t> microbatch;  // -1 for step-level actions
  std::vector<std::int32_t> chunk;       // -1 for step-level actions
  std::vector<std::int32_t> stage;       // the model stage of the chunk; -1 for step-level actions
  std::vector<std::int32_t> peer;        // messages: the other rank; else -1
  std::vector<std::int32_t> tag;         // messages: the MPI tag; else -1
  std::vector<double> start;             // seconds since the rank began the step
  std::vector<double> end;
  std::vector<std::int64_t> bytes;  // SEND_* and RECV_*: rows × cols × sizeof(scalar); else 0

  std::size_t size() const { return rank.size(); }
};

// Root attributes (openPMD's habit: format, version, software, date first).
struct ProfileInfo {
  std::string software_version;  // kpipe's
  std::string date;              // ISO 8601, UTC
  std::string backend;           // Kokkos execution space, e.g. "Serial", "OpenMP", "Cuda"
  std::string device;            // "Kokkos 4.2.0 OpenMP (concurrency 8), MPI 4 ranks"
  std::string schedule;          // the schedule's name
  std::string deck;              // the deck text as read (before command-line overrides)
  std::string overrides;         // the command-line overrides, space separated
  std::int64_t p = 1, v = 1, m = 1, d = 1;
  std::int64_t steps = 0;            // steps recorded
  std::int64_t microbatch_size = 0;  // samples per microbatch
  std::int64_t scalar_bytes = 4;     // sizeof the scalar type of the run
};

struct Profile {
  ProfileInfo info;
  std::vector<std::string> kind_names;  // kind code → "F", "SEND_ACT", ...
  // Every action of every step on every rank, by rank, then step, then list order.
  ActionTable measured;
  // step_start[r · steps + s]: when world rank r began step s, in seconds since the
  // run's common start (a barrier before step 0); add it to `measured` times
  // for one clock across ranks and steps.
  std::vector<double> step_start;
  // Mean measured seconds of F, B and W of each model stage, [3 · stage + {0,1,2}]
  // (runtime::measured_costs; step 0 left out as warm-up when there are more).
  std::vector<double> stage_costs;
  // One step of the same plan simulated with stage_costs (transfers free),
  // every action of every rank; start and end in seconds, step = -1.
  ActionTable predicted;
};

// Writes `profile` to a new file `path` (replaced if present) from this
// process alone; a runtime error naming the file and the object on failure.
void write_profile(const std::string& path, const Profile& profile);

// Reads a profile; an input error (exit 2) naming the file when it is
// missing, not HDF5, not a kpipe profile, of a newer major format version,
// or inconsistent (columns of different lengths, kind codes out of range).
Profile read_profile(const std::string& path);

}  // namespace kpipe::io
