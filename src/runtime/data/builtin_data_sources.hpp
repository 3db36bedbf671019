#pragma once
// kpipe's own data sources, registered first (data_source_kind.cpp).

#include <vector>

#include "kpipe/runtime/data/data_source_kind.hpp"

namespace kpipe::runtime::detail {

// synthetic, hdf5 and text, in that order.
std::vector<DataSourceKind> builtin_data_sources();

}  // namespace kpipe::runtime::detail
