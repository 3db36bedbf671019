#pragma once
// The `csv` data source: a regression table in a CSV file (data.path), one
// sample per line, model.input_dim features then model.output_dim targets.
// Every tenth line (lines 10, 20, ...) is the test split, the rest train.
// The sample at (step, position) is row (step·B + position) mod N of the
// split: a pure function, so any rank fills any microbatch alike.

#include "kpipe/runtime/data/data_source_kind.hpp"

namespace custom {

kpipe::runtime::DataSourceKind csv_source_kind();

}  // namespace custom
