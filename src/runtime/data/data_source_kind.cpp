#include "kpipe/runtime/data/data_source_kind.hpp"

#include <fmt/format.h>

#include "builtin_data_sources.hpp"
#include "kpipe/core/error.hpp"
#include "kpipe/core/fault.hpp"
#include "kpipe/core/log.hpp"
#include "kpipe/core/registry.hpp"
#include "kpipe/core/strings.hpp"

namespace kpipe::runtime {

namespace {

void check_complete(const DataSourceKind& kind) {
  if (!kind.make_float || !kind.make_double) {
    throw input_error(fmt::format(
        "data source \"{}\" needs a factory for float and double (runtime::set_factories sets both)", kind.name));
  }
}

Registry<DataSourceKind>& registry() {
  static Registry<DataSourceKind> kinds("data source", check_complete, detail::builtin_data_sources());
  return kinds;
}

}  // namespace

const DataSourceKind& register_data_source(DataSourceKind kind) { return registry().add(std::move(kind)); }

const DataSourceKind& data_source_kind(const std::string& name) { return registry().at(name, "data.source"); }

std::vector<std::string> data_source_names() { return registry().names(); }

const DataSourceKind& check_data_source(const config::DataConfig& data, const model::TrainerSpec& spec) {
  const DataSourceKind& kind = data_source_kind(data.source);
  if (!kind.path_holds.empty() && data.path.empty()) {
    throw input_error(
        fmt::format("data.source = \"{}\" reads its samples from data.path, which is empty; set data.path to the {} "
                    "(docs/formats.md, \"Datasets\")",
                    kind.name, kind.path_holds));
  }
  if (kind.check) kind.check(data, spec);
  return kind;
}

template <class Scalar>
std::unique_ptr<model::DataSource<Scalar>> make_data_source(const config::DataConfig& data,
                                                            const model::TrainerSpec& spec, io::Split split,
                                                            tensor::ExecContext& exec) {
  fault::inject(fault::Phase::setup_data, log::rank());
  return check_data_source(data, spec).make<Scalar>({data, spec, split, exec});
}

template std::unique_ptr<model::DataSource<float>> make_data_source<float>(const config::DataConfig&,
                                                                           const model::TrainerSpec&, io::Split,
                                                                           tensor::ExecContext&);
template std::unique_ptr<model::DataSource<double>> make_data_source<double>(const config::DataConfig&,
                                                                             const model::TrainerSpec&, io::Split,
                                                                             tensor::ExecContext&);

}  // namespace kpipe::runtime
