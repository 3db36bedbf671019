#pragma once
// `kpipe plan --costs FILE`: the measured costs of a `kpipe run --json`
// summary, a `kpipe sweep --json` fit or a `kpipe run --profile` HDF5 file,
// as a cost fit over the microbatch size (docs/performance-log.md, "Sweep and
// calibrated plan"). Every problem with the file is one input error.

#include <string>

#include "kpipe/schedule/calibration.hpp"

namespace kpipe::runtime {

schedule::CostFit read_cost_file(const std::string& path);

}  // namespace kpipe::runtime
