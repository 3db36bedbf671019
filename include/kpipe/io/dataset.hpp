#pragma once
// A kpipe dataset file (docs/formats.md, "Datasets"): /train/x and /test/x
// hold N x F float32 features, /train/y and /test/y N int32 labels or N x T
// float32 targets, and the root carries format = "kpipe-dataset",
// format_version and, for labels, classes.
//
// Opening validates the whole layout (groups, shapes, dtypes, emptiness,
// label range) and throws one-line input errors (exit code 2) that name the
// file and the object. Features and float targets stay in the file and are
// read row by row with hyperslabs, so a rank reads only the samples of its
// microbatches; the int32 labels (4 bytes a sample) are read once, because
// their range has to be checked anyway.

#include <cstdint>
#include <string>
#include <vector>

#include "kpipe/io/hdf5.hpp"

namespace kpipe::io {

enum class Split { train, test };

// "train" or "test".
const char* name_of(Split split);

class DatasetFile {
 public:
  static constexpr const char* format_name = "kpipe-dataset";
  static constexpr std::int64_t format_version = 1;

  // Opens `file_name` serially, read-only, validates both splits and keeps
  // `split` open for reading.
  DatasetFile(const std::string& file_name, Split split);

  const std::string& file_name() const { return file_name_; }
  Split split() const { return split_; }
  // Samples of the open split.
  std::int64_t rows() const { return layout_.rows; }
  // F: features per sample.
  int features() const { return layout_.features; }
  // Whether the targets are int32 class labels (else float32 target rows).
  bool has_labels() const { return layout_.has_labels; }
  // Classes (labels) or target values per sample (T).
  int outputs() const { return layout_.outputs; }
  // "/train/x is 60000 x 784" for messages.
  std::string describe_features() const;

  // out[i * F ...] = features of row rows[i], for i < count; T converted by HDF5.
  template <class T>
  void read_features(const std::int64_t* rows, std::size_t count, T* out) const {
    for (std::size_t i = 0; i < count; ++i) x_.read_rows(out + i * layout_.features, check(rows[i]), 1);
  }
  // out[i] = label of row rows[i]; needs has_labels().
  void read_labels(const std::int64_t* rows, std::size_t count, int* out) const;
  // out[i * T ...] = targets of row rows[i]; needs !has_labels().
  template <class T>
  void read_targets(const std::int64_t* rows, std::size_t count, T* out) const {
    for (std::size_t i = 0; i < count; ++i) y_.read_rows(out + i * layout_.outputs, check(rows[i]), 1);
  }

 private:
  // What validation found, for the open split.
  struct Layout {
    std::int64_t rows = 0;
    int features = 0;
    bool has_labels = true;
    int outputs = 0;
    std::vector<int> labels;  // when has_labels
  };
  static Layout validate(const hdf5::File& file, Split split);
  // Opens the file once the constructor's reads (validate, the datasets it
  // keeps) have been rehearsed in a child (hdf5::Rehearsal); the rows read
  // later are covered by the walk that follows there.
  static hdf5::File open(const std::string& file_name, Split split);

  std::uint64_t check(std::int64_t row) const;

  std::string file_name_;
  Split split_;
  hdf5::File file_;
  Layout layout_;
  hdf5::Dataset x_;
  hdf5::Dataset y_;
};

}  // namespace kpipe::io
