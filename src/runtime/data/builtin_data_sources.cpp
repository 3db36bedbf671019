#include "builtin_data_sources.hpp"

#include <fmt/format.h>

#include "kpipe/core/error.hpp"
#include "kpipe/model/data/synthetic.hpp"
#include "kpipe/runtime/data/dataset_source.hpp"
#include "kpipe/runtime/data/token_source.hpp"

namespace kpipe::runtime::detail {

namespace {

// A transformer reads sequences of a token stream (token_source.hpp) from
// any built-in source; the other models read rows.
bool reads_tokens(const model::TrainerSpec& spec) { return spec.model.token_sequences(); }

DataSourceKind synthetic() {
  DataSourceKind kind{"synthetic", {}, {}, {}, {}};
  set_factories(kind, [](auto scalar, const DataBuild& build) -> std::unique_ptr<model::DataSource<decltype(scalar)>> {
    using Scalar = decltype(scalar);
    if (reads_tokens(build.spec)) return make_token_source<Scalar>(build.data, build.spec, build.split, build.exec);
    return std::make_unique<model::SyntheticData<Scalar>>(build.spec.data, build.exec);
  });
  return kind;
}

DataSourceKind hdf5() {
  DataSourceKind kind{"hdf5", "HDF5 dataset", {}, {}, {}};
  set_factories(kind, [](auto scalar, const DataBuild& build) -> std::unique_ptr<model::DataSource<decltype(scalar)>> {
    using Scalar = decltype(scalar);
    if (reads_tokens(build.spec)) return make_token_source<Scalar>(build.data, build.spec, build.split, build.exec);
    return std::make_unique<DatasetSource<Scalar>>(build.data.path, build.split, build.spec, build.exec);
  });
  return kind;
}

DataSourceKind text() {
  DataSourceKind kind{"text", "UTF-8 text file", {}, {}, {}};
  kind.check = [](const config::DataConfig&, const model::TrainerSpec& spec) {
    if (reads_tokens(spec)) return;
    throw input_error(
        fmt::format("data.source = \"text\" holds token sequences, which only a language model reads; set "
                    "model.kind = {} or choose data.source = \"synthetic\" or \"hdf5\"",
                    config::token_family_choices()));
  };
  set_factories(kind, [](auto scalar, const DataBuild& build) {
    return make_token_source<decltype(scalar)>(build.data, build.spec, build.split, build.exec);
  });
  return kind;
}

}  // namespace

std::vector<DataSourceKind> builtin_data_sources() { return {synthetic(), hdf5(), text()}; }

}  // namespace kpipe::runtime::detail
