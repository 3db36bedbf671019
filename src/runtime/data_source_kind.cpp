#include "kpipe/runtime/data_source_kind.hpp"

#include <fmt/format.h>

#include <deque>

#include "builtin_data_sources.hpp"
#include "kpipe/core/error.hpp"
#include "kpipe/core/strings.hpp"

namespace kpipe::runtime {

namespace {

void check_complete(const DataSourceKind& kind) {
  if (kind.name.empty()) throw input_error("a data source needs a name");
  if (!kind.make_float || !kind.make_double) {
    throw input_error(fmt::format(
        "data source \"{}\" needs a factory for float and double (runtime::set_factories sets both)", kind.name));
  }
}

// A deque: references to its elements stay valid as kinds are added.
std::deque<DataSourceKind>& registry() {
  static std::deque<DataSourceKind> kinds = [] {
    std::deque<DataSourceKind> builtins;
    for (DataSourceKind& kind : detail::builtin_data_sources()) {
      check_complete(kind);
      builtins.push_back(std::move(kind));
    }
    return builtins;
  }();
  return kinds;
}

const DataSourceKind* find(const std::string& name) {
  for (const DataSourceKind& source : registry()) {
    if (source.name == name) return &source;
  }
  return nullptr;
}

}  // namespace

const DataSourceKind& register_data_source(DataSourceKind kind) {
  check_complete(kind);
  if (find(kind.name)) {
    throw input_error(
        fmt::format("data source \"{}\" is registered twice; give the new source another name", kind.name));
  }
  return registry().emplace_back(std::move(kind));
}

const DataSourceKind& data_source_kind(const std::string& name) {
  if (const DataSourceKind* kind = find(name)) return *kind;
  const auto names = data_source_names();
  const std::string nearest = nearest_match(name, names);
  throw input_error(fmt::format("data.source = \"{}\" is not a data source{}; registered sources are {}",
                                printable(name), nearest.empty() ? "" : fmt::format(" (did you mean \"{}\"?)", nearest),
                                join_choices(names, " and ")));
}

std::vector<std::string> data_source_names() {
  std::vector<std::string> names;
  for (const DataSourceKind& kind : registry()) names.push_back(kind.name);
  return names;
}

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
  return check_data_source(data, spec).make<Scalar>({data, spec, split, exec});
}

template std::unique_ptr<model::DataSource<float>> make_data_source<float>(const config::DataConfig&,
                                                                           const model::TrainerSpec&, io::Split,
                                                                           tensor::ExecContext&);
template std::unique_ptr<model::DataSource<double>> make_data_source<double>(const config::DataConfig&,
                                                                             const model::TrainerSpec&, io::Split,
                                                                             tensor::ExecContext&);

}  // namespace kpipe::runtime
