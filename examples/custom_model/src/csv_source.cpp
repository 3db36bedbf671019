#include "csv_source.hpp"

#include <fmt/format.h>

#include <Kokkos_Core.hpp>
#include <charconv>
#include <fstream>
#include <string>
#include <vector>

#include "kpipe/core/error.hpp"

namespace custom {

namespace {

using kpipe::runtime::DataBuild;

// The split's rows, row-major, `columns` numbers each.
struct Table {
  std::vector<double> values;
  int columns = 0;
  std::int64_t rows() const { return static_cast<std::int64_t>(values.size()) / columns; }
};

// One line's numbers; an input error naming the line and what is wrong.
void parse_line(const std::string& path, int number, const std::string& line, int columns, std::vector<double>& out) {
  std::size_t at = 0;
  for (int c = 0; c < columns; ++c) {
    const std::size_t end = std::min(line.find(',', at), line.size());
    double value = 0.0;
    const auto [next, error] = std::from_chars(line.data() + at, line.data() + end, value);
    if (error != std::errc() || next != line.data() + end) {
      throw kpipe::input_error(
          fmt::format("{}:{}: column {} is not a number; each line holds {} numbers separated "
                      "by commas (model.input_dim features, then model.output_dim targets)",
                      path, number, c + 1, columns));
    }
    out.push_back(value);
    at = end + 1;
    if (end == line.size() && c + 1 < columns) {
      throw kpipe::input_error(
          fmt::format("{}:{}: {} numbers, but model.input_dim + model.output_dim = {}", path, number, c + 1, columns));
    }
  }
  if (at <= line.size()) {
    throw kpipe::input_error(
        fmt::format("{}:{}: more than model.input_dim + model.output_dim = {} numbers", path, number, columns));
  }
}

Table read_split(const std::string& path, int columns, kpipe::io::Split split) {
  std::ifstream file(path);
  if (!file) throw kpipe::input_error(fmt::format("data.path = \"{}\" cannot be opened; give a CSV file", path));
  Table table{{}, columns};
  std::string line;
  for (int number = 1; std::getline(file, line); ++number) {
    if ((number % 10 == 0) == (split == kpipe::io::Split::test)) parse_line(path, number, line, columns, table.values);
  }
  if (table.rows() == 0) throw kpipe::input_error(fmt::format("data.path = \"{}\" holds no samples", path));
  return table;
}

template <class Scalar>
class CsvRows final : public kpipe::model::DataSource<Scalar> {
 public:
  explicit CsvRows(const DataBuild& build)
      : inputs_(build.spec.model.input_dim),
        batch_(build.spec.global_batch),
        table_(read_split(build.data.path, inputs_ + build.spec.model.output_dim, build.split)),
        exec_(build.exec) {}

  void fill_inputs(std::int64_t step, std::int64_t first, const kpipe::tensor::Matrix<Scalar>& X) const override {
    fill(step, first, X, 0, inputs_);
  }
  void fill_targets(std::int64_t step, std::int64_t first,
                    const kpipe::model::Targets<Scalar>& targets) const override {
    fill(step, first, targets.values, inputs_, table_.columns - inputs_);
  }
  std::int64_t samples() const override { return table_.rows(); }

 private:
  // Columns [from, from + count) of the rows at (step, first ...) into M.
  void fill(std::int64_t step, std::int64_t first, const kpipe::tensor::Matrix<Scalar>& M, int from, int count) const {
    const auto rows = static_cast<std::int64_t>(M.extent(0));
    exec_.space().fence();  // the previous copy may still read the staging buffer
    staged_.resize(static_cast<std::size_t>(rows * count));
    for (std::int64_t i = 0; i < rows; ++i) {
      const std::int64_t row = (step * batch_ + first + i) % table_.rows();
      for (int c = 0; c < count; ++c) {
        staged_[i * count + c] = static_cast<Scalar>(table_.values[row * table_.columns + from + c]);
      }
    }
    Kokkos::deep_copy(exec_.space(), M, kpipe::tensor::HostRows<Scalar>(staged_.data(), rows, count));
  }

  int inputs_;
  std::int64_t batch_;
  Table table_;
  kpipe::tensor::ExecContext& exec_;
  mutable std::vector<Scalar> staged_;
};

}  // namespace

kpipe::runtime::DataSourceKind csv_source_kind() {
  kpipe::runtime::DataSourceKind kind;
  kind.name = "csv";
  kind.path_holds = "CSV file";
  kind.check = [](const kpipe::config::DataConfig& data, const kpipe::model::TrainerSpec& spec) {
    if (data.task != kpipe::config::Task::regression || spec.model.positions() != 1) {
      throw kpipe::input_error(
          "data.source = \"csv\" holds regression rows; set data.task = \"regression\" and model.loss = \"mse\" "
          "with an MLP or residual MLP");
    }
  };
  kpipe::runtime::set_factories(
      kind, [](auto scalar, const DataBuild& build) { return std::make_unique<CsvRows<decltype(scalar)>>(build); });
  return kind;
}

}  // namespace custom
