#pragma once
// A small RAII layer over the HDF5 C API (DESIGN.md §5), shared by
// checkpoints and profiles. Every handle closes itself; every HDF5 failure
// becomes a kpipe::Error that names the file and the object ("checkpoint.h5:
// /parameters/layer3.weight: ..."), with HDF5's own innermost reason, and
// HDF5's error stack is never printed.
//
// Serial use (one rank, or one file per rank):
//   auto file = io::hdf5::File::create("profile-rank0.h5");
//   auto actions = file.create_group("actions");
//   actions.write("start", std::vector<double>{...});
//   actions.set_attribute("rank", std::int64_t{0});
//
// Parallel use (a file opened with a communicator): every rank creates every
// group, dataset and attribute with identical arguments, in the same order,
// then each rank writes its own rows with Dataset::write_rows (collective
// transfer: every rank calls it, a rank with nothing to write passes 0 rows),
// or a dataset one rank holds whole with Dataset::write_alone (independent:
// only that rank calls it).
// Reads are independent: any rank reads what it needs. Collective metadata
// reads stay off (broken in HDF5 1.10.8, fixed in 1.10.9).
//
// Strings are fixed-length, null-terminated ASCII (openPMD's habit), which
// h5dump prints and h5py reads as bytes.

#include <mpi.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kpipe/core/error.hpp"
#include "kpipe/core/limits.hpp"
#include "kpipe/tensor/spec.hpp"

namespace kpipe::io::hdf5 {

// The element types a dataset may hold. bfloat16 is stored as an HDF5 float
// type of its own (sign, 8 exponent bits with bias 127, 7 mantissa bits) and
// float16 as IEEE binary16 (5 exponent bits with bias 15, 10 mantissa bits),
// so h5py and h5dump read the values, not raw 16-bit words.
enum class Type { float32, float64, int32, int64, uint64, bfloat16, float16 };

// "float32", "float64", "int32", "int64", "uint64", "bfloat16" or "float16".
const char* name_of(Type type);

template <class T>
constexpr Type type_of();
template <>
constexpr Type type_of<float>() {
  return Type::float32;
}
template <>
constexpr Type type_of<double>() {
  return Type::float64;
}
template <>
constexpr Type type_of<std::int32_t>() {
  return Type::int32;
}
template <>
constexpr Type type_of<std::int64_t>() {
  return Type::int64;
}
template <>
constexpr Type type_of<std::uint64_t>() {
  return Type::uint64;
}
template <>
constexpr Type type_of<tensor::BFloat16>() {
  return Type::bfloat16;
}
template <>
constexpr Type type_of<tensor::Half>() {
  return Type::float16;
}

namespace detail {
// An owned hid_t (int64_t in HDF5 >= 1.10) and the function that closes it.
class Handle {
 public:
  using Closer = int (*)(std::int64_t);
  Handle() = default;
  Handle(std::int64_t id, Closer closer) : id_(id), closer_(closer) {}
  ~Handle() { reset(); }
  Handle(Handle&& other) noexcept : id_(other.id_), closer_(other.closer_) { other.id_ = -1; }
  Handle& operator=(Handle&& other) noexcept;
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;

  std::int64_t get() const { return id_; }
  bool valid() const { return id_ >= 0; }
  // Closes now; returns HDF5's status (negative on failure), 0 when already closed.
  int reset();
  // Forgets the id without closing it.
  void release() { id_ = -1; }

 private:
  std::int64_t id_ = -1;
  Closer closer_ = nullptr;
};

// What every object knows about where it lives, for error messages.
struct Where {
  std::string file;
  ErrorKind kind;  // input for files opened to read, runtime for files written
  bool parallel;
};
}  // namespace detail

// Attributes, shared by files (the root group), groups and datasets.
class Object {
 public:
  // In a parallel file, closing is collective; an object destroyed by an
  // exception (one rank failing while the others wait in a collective call)
  // is therefore left open rather than deadlock the job, which is ending.
  ~Object();
  Object(Object&&) noexcept = default;
  Object& operator=(Object&&) noexcept = default;

  // Fixed-length ASCII string attribute; replaces one of the same name.
  void set_attribute(const std::string& name, const std::string& value);
  void set_attribute(const std::string& name, const char* value) { set_attribute(name, std::string(value)); }
  void set_attribute(const std::string& name, std::int64_t value);
  void set_attribute(const std::string& name, std::uint64_t value);
  void set_attribute(const std::string& name, double value);
  void set_attribute(const std::string& name, int value) { set_attribute(name, std::int64_t{value}); }

  bool has_attribute(const std::string& name) const;
  // Throw (naming the object and the attribute) when absent or of another class.
  // At most `most_bytes`: a fixed-size string declaring more fails before
  // anything is allocated, a variable-length one once HDF5 has read it.
  std::string string_attribute(const std::string& name, std::size_t most_bytes = limits::attribute_bytes) const;
  std::int64_t int_attribute(const std::string& name) const;
  std::uint64_t uint_attribute(const std::string& name) const;
  double double_attribute(const std::string& name) const;

  // "/parameters/layer0.weight"; "/" for a file.
  const std::string& path() const { return path_; }
  const std::string& file_name() const { return where_->file; }

 protected:
  Object(detail::Handle handle, std::string path, std::shared_ptr<const detail::Where> where)
      : handle_(std::move(handle)), path_(std::move(path)), where_(std::move(where)) {}
  std::int64_t id() const { return handle_.get(); }
  std::string child_path(const std::string& name) const;
  // Throws "<file>: <path>: <what>: <HDF5's innermost reason>".
  [[noreturn]] void fail(const std::string& what) const;

  detail::Handle handle_;
  std::string path_;
  std::shared_ptr<const detail::Where> where_;

  friend class Group;
};

// A 1-D or 2-D dataset.
class Dataset : public Object {
 public:
  // Extents: {n} or {rows, cols}.
  std::vector<std::uint64_t> shape() const;
  Type type() const;
  // The product of the extents; fails when it overflows 64 bits.
  std::uint64_t elements() const;
  // Fails unless the file stores what the dataset declares: a dimension of
  // 2^32 + n, a shell of never-written chunks or a truncated file must not
  // become an allocation of what it declares. Unfiltered data must be there
  // byte for byte; filtered (compressed) data within deflate's largest ratio.
  void require_stored() const;
  // Whether libhdf5's read of it is a copy of stored bytes: contiguous
  // layout, no filters, in the native representation of type(). It then
  // decodes nothing it reads, so no value the data holds can steer it: a
  // rehearsal (below) may leave those bytes to the reader itself.
  bool stored_verbatim() const;
  // Where a dataset stored_verbatim() lies in the file (allocated at
  // creation: create_dataset allocates early), to read or write its bytes
  // without libhdf5 (io::UncachedFile); nullopt for any other dataset.
  struct Bytes {
    std::uint64_t offset, size;
  };
  std::optional<Bytes> stored_bytes() const;

  // Writes rows [first_row, first_row + rows) (whole rows, row-major) from
  // `data`. In a parallel file every rank calls it (collective transfer); a
  // rank with nothing to write passes rows = 0 (data may be null).
  template <class T>
  void write_rows(const T* data, std::uint64_t first_row, std::uint64_t rows) {
    write_rows_raw(type_of<T>(), data, first_row, rows, Transfer::collective);
  }
  // The whole dataset from this rank alone, which the other ranks of a
  // parallel file do not call (an independent transfer: MPI-IO writes this
  // rank's bytes itself, where a collective one would route them through an
  // aggregating rank). `data` holds elements() values.
  template <class T>
  void write_alone(const T* data) {
    write_rows_raw(type_of<T>(), data, 0, shape().at(0), Transfer::independent);
  }
  // The whole dataset from this rank (in a parallel file the other ranks call
  // write_rows with 0 rows). Throws unless data has elements() values.
  template <class T>
  void write(const std::vector<T>& data) {
    check_size(data.size());
    write_rows(data.data(), 0, shape().at(0));
  }

  // Reads rows [first_row, first_row + rows) into `data` (independent transfer).
  template <class T>
  void read_rows(T* data, std::uint64_t first_row, std::uint64_t rows) const {
    read_rows_raw(type_of<T>(), data, first_row, rows);
  }
  // The whole dataset, converted to T by HDF5.
  template <class T>
  std::vector<T> read() const {
    require_stored();
    const auto extent = shape();
    if (extent.empty()) fail("is a scalar, where rows are expected");
    std::vector<T> data(static_cast<std::size_t>(elements()));
    if (!data.empty()) read_rows(data.data(), 0, extent.front());
    return data;
  }

 private:
  using Object::Object;
  enum class Transfer { collective, independent };
  void write_rows_raw(Type type, const void* data, std::uint64_t first_row, std::uint64_t rows, Transfer transfer);
  void read_rows_raw(Type type, void* data, std::uint64_t first_row, std::uint64_t rows) const;
  void check_size(std::size_t size) const;
  friend class Group;
};

class Group : public Object {
 public:
  Group create_group(const std::string& name);
  Group open_group(const std::string& name) const;
  // Whether a link `name` exists in this group.
  bool has(const std::string& name) const;
  // The names of the group's members, in name order.
  std::vector<std::string> names() const;

  // shape: {n} or {rows, cols}. Contiguous layout: no chunking, no filters,
  // so parallel writes need no collective chunk allocation.
  Dataset create_dataset(const std::string& name, Type type, const std::vector<std::uint64_t>& shape);
  Dataset open_dataset(const std::string& name) const;

  // Serial convenience: creates the 1-D dataset `name` and writes `values`.
  template <class T>
  Dataset write(const std::string& name, const std::vector<T>& values) {
    auto dataset = create_dataset(name, type_of<T>(), std::vector<std::uint64_t>{values.size()});
    dataset.write(values);
    return dataset;
  }

 protected:
  using Object::Object;
  friend class File;

 private:
  // Opens go only to objects this file stores: a soft or external link (to
  // another file, a FIFO, a device) fails, as a virtual dataset does.
  void require_stored_here(const std::string& name) const;
};

// An HDF5 file; it is its own root group. Closes in its destructor (errors
// there are swallowed: call close() to see them).
class File : public Group {
 public:
  enum class Exists { fail, truncate };

  // Serial. Exists::fail refuses an existing file.
  static File create(const std::string& file_name, Exists exists = Exists::fail);
  // Collective over `comm` (MPI-IO driver); every rank passes the same name.
  static File create(const std::string& file_name, MPI_Comm comm, Exists exists = Exists::fail);
  // Read-only. Errors here are input errors (exit code 2): the file is the user's.
  static File open(const std::string& file_name);
  static File open(const std::string& file_name, MPI_Comm comm);

  // Whether the file was opened with a communicator.
  bool parallel() const { return where_->parallel; }
  void flush();
  // Closes the file and every handle HDF5 still holds in it; throws on failure.
  void close();

 private:
  using Group::Group;
  static File make(const std::string& file_name, MPI_Comm comm, bool parallel, bool create, Exists exists);
};

// Whether `file_name` starts with the HDF5 signature (false for a missing file).
bool is_hdf5(const std::string& file_name);

// A reader's rehearsal: constructed with `read` (File::open of `file_name`
// and the reads that follow), it runs `read` in a child process first.
// libhdf5 does the same on the same bytes given the same calls, so a file
// that crashes or hangs it does so in the child and is refused in one line,
// and a file `read` refuses there is refused here with the same line, unread.
// The walk every File::open makes (hdf5_check.hpp) is not enough: its calls
// are not a reader's, and some damage crashes libhdf5 on one path and not on
// another. While the rehearsal lives, this thread's File::open of `file_name`
// skips the walk: a reader that reads more later than `read` did (rows on
// demand) asks for the walk in the child after `read` (Then::walk). Data
// stored verbatim the reader may read without libhdf5 (stored_bytes()):
// then `read` makes the libhdf5 calls that find it and reads none of it. In the
// child `read` must only read (no Kokkos, MPI or output: the child is a fork
// of this process).
class Rehearsal {
 public:
  enum class Then { done, walk };
  Rehearsal(const std::string& file_name, const std::function<void()>& read, Then then = Then::done);
  Rehearsal(const Rehearsal&) = delete;
  Rehearsal& operator=(const Rehearsal&) = delete;
  ~Rehearsal();

 private:
  std::string file_name_;
  const std::string* previous_;
};

}  // namespace kpipe::io::hdf5
