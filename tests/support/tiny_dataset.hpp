#pragma once
// A small kpipe dataset written at test time with the io wrapper
// (docs/formats.md, "Datasets"): feature j of train row i is i + j / 100,
// so a test can tell which row it received; labels are i % classes (or,
// with targets > 0, float targets: value t of row i is tiny_feature(i, t));
// test rows are numbered on from the train rows.

#include <cstdint>
#include <string>
#include <vector>

#include "kpipe/io/dataset.hpp"
#include "kpipe/io/hdf5.hpp"

namespace kpipe::test {

inline float tiny_feature(std::int64_t row, int j) { return static_cast<float>(row) + static_cast<float>(j) / 100; }

inline void write_tiny_dataset(const std::string& path, int train_rows, int test_rows, int features, int classes,
                               int targets = 0) {
  auto file = io::hdf5::File::create(path, io::hdf5::File::Exists::truncate);
  file.set_attribute("format", io::DatasetFile::format_name);
  file.set_attribute("format_version", io::DatasetFile::format_version);
  if (targets == 0) file.set_attribute("classes", std::int64_t{classes});
  int first = 0;
  for (const auto& [split, rows] : {std::pair<const char*, int>{"train", train_rows}, {"test", test_rows}}) {
    auto group = file.create_group(split);
    std::vector<float> x;
    std::vector<std::int32_t> y;
    std::vector<float> values;
    for (int i = first; i < first + rows; ++i) {
      for (int j = 0; j < features; ++j) x.push_back(tiny_feature(i, j));
      for (int t = 0; t < targets; ++t) values.push_back(tiny_feature(i, t));
      if (targets == 0) y.push_back(i % classes);
    }
    group
        .create_dataset("x", io::hdf5::Type::float32,
                        {static_cast<std::uint64_t>(rows), static_cast<std::uint64_t>(features)})
        .write(x);
    if (targets == 0) {
      group.write("y", y);
    } else {
      group
          .create_dataset("y", io::hdf5::Type::float32,
                          {static_cast<std::uint64_t>(rows), static_cast<std::uint64_t>(targets)})
          .write(values);
    }
    first += rows;
  }
  file.close();
}

}  // namespace kpipe::test
