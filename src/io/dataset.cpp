#include "kpipe/io/dataset.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>

#include "kpipe/core/error.hpp"
#include "kpipe/core/limits.hpp"

namespace kpipe::io {

namespace {

std::string shape_text(const std::vector<std::uint64_t>& shape) {
  std::string text;
  for (std::size_t i = 0; i < shape.size(); ++i) text += (i ? " x " : "") + std::to_string(shape[i]);
  return text.empty() ? "a scalar" : text;
}

[[noreturn]] void bad(const std::string& file, const std::string& what) {
  throw input_error(fmt::format("data.path = \"{}\": {} (layout: docs/formats.md, \"Datasets\")", file, what));
}

// One split's x and y, checked against each other.
struct SplitShape {
  std::uint64_t rows = 0;
  std::uint64_t features = 0;
  bool has_labels = true;
  std::uint64_t outputs = 0;  // target columns when !has_labels
};

SplitShape split_shape(const hdf5::File& file, Split split) {
  const std::string name = name_of(split);
  if (!file.has(name)) bad(file.file_name(), fmt::format("has no group /{}", name));
  const auto group = file.open_group(name);
  for (const char* member : {"x", "y"}) {
    if (!group.has(member)) bad(file.file_name(), fmt::format("has no dataset /{}/{}", name, member));
  }
  const auto x = group.open_dataset("x");
  const auto y = group.open_dataset("y");
  const auto xs = x.shape(), ys = y.shape();
  if (xs.size() != 2 || x.type() != hdf5::Type::float32) {
    bad(file.file_name(),
        fmt::format("/{}/x is {} {}; it must be N x F float32", name, shape_text(xs), hdf5::name_of(x.type())));
  }
  SplitShape shape{xs[0], xs[1], true, 0};
  if (shape.rows == 0 || shape.features == 0) {
    bad(file.file_name(), fmt::format("/{}/x is {}: the split is empty", name, shape_text(xs)));
  }
  if (shape.features > limits::layer_width) {
    bad(file.file_name(), fmt::format("/{}/x has {} features per sample, more than model.input_dim takes ({})", name,
                                      shape.features, limits::layer_width));
  }
  const bool labels = ys.size() == 1 && y.type() == hdf5::Type::int32;
  const bool targets = ys.size() == 2 && y.type() == hdf5::Type::float32 && ys[1] > 0;
  if ((!labels && !targets) || ys[0] != shape.rows) {
    bad(file.file_name(),
        fmt::format("/{}/y is {} {}; with /{}/x of {} rows it must be {} int32 labels or {} x T "
                    "float32 targets",
                    name, shape_text(ys), hdf5::name_of(y.type()), name, shape.rows, shape.rows, shape.rows));
  }
  shape.has_labels = labels;
  shape.outputs = targets ? ys[1] : 0;
  if (shape.outputs > limits::layer_width) {
    bad(file.file_name(), fmt::format("/{}/y has {} targets per sample, more than model.output_dim takes ({})", name,
                                      shape.outputs, limits::layer_width));
  }
  // Rows are read by hyperslab later: the file must hold every row it declares.
  x.require_stored();
  y.require_stored();
  return shape;
}

}  // namespace

const char* name_of(Split split) { return split == Split::train ? "train" : "test"; }

DatasetFile::Layout DatasetFile::validate(const hdf5::File& file, Split split) {
  const std::string& name = file.file_name();
  if (!file.has_attribute("format") || file.string_attribute("format") != format_name) {
    bad(name, fmt::format("the root attribute format is not \"{}\"", format_name));
  }
  if (file.has_attribute("format_version") && file.int_attribute("format_version") > format_version) {
    bad(name, fmt::format("format_version {} is newer than this kpipe reads ({})", file.int_attribute("format_version"),
                          format_version));
  }
  const SplitShape train = split_shape(file, Split::train), test = split_shape(file, Split::test);
  if (train.features != test.features || train.has_labels != test.has_labels || train.outputs != test.outputs) {
    bad(name, fmt::format("/train and /test differ: {} and {} features, {} and {}", train.features, test.features,
                          train.has_labels ? "labels" : fmt::format("{} targets", train.outputs),
                          test.has_labels ? "labels" : fmt::format("{} targets", test.outputs)));
  }
  Layout layout;
  const SplitShape& mine = split == Split::train ? train : test;
  layout.rows = static_cast<std::int64_t>(mine.rows);
  layout.features = static_cast<int>(mine.features);
  layout.has_labels = mine.has_labels;
  layout.outputs = static_cast<int>(mine.outputs);
  if (!layout.has_labels) return layout;

  // Classes: the attribute, else max label + 1 over both splits; every label in range.
  std::vector<std::vector<int>> labels;
  int max_label = -1;
  for (Split s : {Split::train, Split::test}) {
    labels.push_back(file.open_group(name_of(s)).open_dataset("y").read<int>());
    for (int label : labels.back()) max_label = std::max(max_label, label);
  }
  const bool attribute = file.has_attribute("classes");
  const std::int64_t classes = attribute ? file.int_attribute("classes") : max_label + 1;
  if (classes < 1 || classes > limits::layer_width) {
    bad(name, fmt::format("classes = {}; a classification dataset has 1 to {} classes (model.output_dim)", classes,
                          limits::layer_width));
  }
  for (Split s : {Split::train, Split::test}) {
    const auto& ys = labels[s == Split::train ? 0 : 1];
    const auto wrong = std::find_if(ys.begin(), ys.end(), [&](int y) { return y < 0 || y >= classes; });
    if (wrong != ys.end()) {
      bad(name, fmt::format("/{}/y[{}] = {} is outside [0, {}){}", name_of(s), wrong - ys.begin(), *wrong, classes,
                            attribute ? " (the root attribute classes)" : ""));
    }
  }
  layout.outputs = static_cast<int>(classes);
  layout.labels = std::move(labels[split == Split::train ? 0 : 1]);
  return layout;
}

hdf5::File DatasetFile::open(const std::string& file_name, Split split) {
  if (!hdf5::is_hdf5(file_name)) {
    std::error_code error;
    const bool exists = std::filesystem::exists(file_name, error);
    throw input_error(fmt::format("data.path = \"{}\" {}; make a dataset with examples/data/", file_name,
                                  exists ? "is not an HDF5 file" : "does not exist"));
  }
  const hdf5::Rehearsal rehearsal(
      file_name,
      [&] {
        const auto file = hdf5::File::open(file_name);
        validate(file, split);
        file.open_group(name_of(split)).open_dataset("x");
        file.open_group(name_of(split)).open_dataset("y");
      },
      hdf5::Rehearsal::Then::walk);
  return hdf5::File::open(file_name);
}

DatasetFile::DatasetFile(const std::string& file_name, Split split)
    : file_name_(file_name),
      split_(split),
      file_(open(file_name, split)),
      layout_(validate(file_, split)),
      x_(file_.open_group(name_of(split)).open_dataset("x")),
      y_(file_.open_group(name_of(split)).open_dataset("y")) {}

std::string DatasetFile::describe_features() const {
  return fmt::format("/{}/x is {} x {}", name_of(split_), layout_.rows, layout_.features);
}

std::uint64_t DatasetFile::check(std::int64_t row) const {
  if (row < 0 || row >= layout_.rows) {
    throw runtime_error(
        fmt::format("{}: row {} of /{} is outside [0, {})", file_name_, row, name_of(split_), layout_.rows));
  }
  return static_cast<std::uint64_t>(row);
}

void DatasetFile::read_labels(const std::int64_t* rows, std::size_t count, int* out) const {
  for (std::size_t i = 0; i < count; ++i) out[i] = layout_.labels[check(rows[i])];
}

}  // namespace kpipe::io
