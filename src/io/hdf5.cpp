#include "kpipe/io/hdf5.hpp"

#include <fmt/format.h>
#include <hdf5.h>

#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <functional>
#include <type_traits>
#include <utility>

#include "hdf5_check.hpp"

namespace kpipe::io::hdf5 {

static_assert(std::is_same<hid_t, std::int64_t>::value, "kpipe needs HDF5 >= 1.10 (64-bit hid_t)");

namespace {

// HDF5 prints its error stack to stderr by default; kpipe reports one line instead.
void silence_hdf5() {
  static const bool silenced = [] {
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    return true;
  }();
  (void)silenced;
}

// The innermost (most specific) description on HDF5's error stack, then clears it.
std::string hdf5_reason() {
  std::string reason;
  H5Ewalk2(
      H5E_DEFAULT, H5E_WALK_UPWARD,
      [](unsigned n, const H5E_error2_t* error, void* data) -> herr_t {
        if (n == 0 && error->desc) *static_cast<std::string*>(data) = error->desc;
        return 0;
      },
      &reason);
  H5Eclear2(H5E_DEFAULT);
  return reason;
}

// Each element type as kpipe names it, as it sits in memory, and as files
// store it: little-endian, the same bytes on every machine kpipe runs on.
struct TypeInfo {
  const char* name;
  hid_t native;
  hid_t stored;
};

// A 16-bit little-endian float type: sign bit 15, `exponent_bits` above
// `mantissa_bits` mantissa bits, exponent bias `bias`.
hid_t float16_layout(std::size_t exponent_bits, std::size_t mantissa_bits, std::size_t bias) {
  const hid_t t = H5Tcopy(H5T_IEEE_F32LE);
  H5Tset_fields(t, 15, mantissa_bits, exponent_bits, 0, mantissa_bits);
  H5Tset_precision(t, 16);
  H5Tset_size(t, 2);
  H5Tset_ebias(t, bias);
  return t;
}

// bfloat16: float32's layout cut to its upper half (exponent bits 7-14 with
// bias 127, mantissa bits 0-6). Made once.
hid_t bfloat16_type() {
  static const hid_t type = float16_layout(8, 7, 127);
  return type;
}

// IEEE binary16 (numpy's float16): exponent bits 10-14 with bias 15,
// mantissa bits 0-9; HDF5 1.10 has no predefined type for it. Made once.
hid_t float16_type() {
  static const hid_t type = float16_layout(5, 10, 15);
  return type;
}

TypeInfo info(Type type) {
  switch (type) {
    case Type::bfloat16:
      return {"bfloat16", bfloat16_type(), bfloat16_type()};
    case Type::float16:
      return {"float16", float16_type(), float16_type()};
    case Type::float32:
      return {"float32", H5T_NATIVE_FLOAT, H5T_IEEE_F32LE};
    case Type::float64:
      return {"float64", H5T_NATIVE_DOUBLE, H5T_IEEE_F64LE};
    case Type::int32:
      return {"int32", H5T_NATIVE_INT32, H5T_STD_I32LE};
    case Type::int64:
      return {"int64", H5T_NATIVE_INT64, H5T_STD_I64LE};
    case Type::uint64:
      return {"uint64", H5T_NATIVE_UINT64, H5T_STD_U64LE};
  }
  return {"?", H5T_NATIVE_FLOAT, H5T_IEEE_F32LE};
}

detail::Handle dataspace(const std::vector<hsize_t>& dims) {
  return detail::Handle(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr), H5Sclose);
}

}  // namespace

const char* name_of(Type type) { return info(type).name; }

namespace detail {

Handle& Handle::operator=(Handle&& other) noexcept {
  if (this != &other) {
    reset();
    id_ = other.id_;
    closer_ = other.closer_;
    other.id_ = -1;
  }
  return *this;
}

int Handle::reset() {
  int status = 0;
  if (id_ >= 0 && closer_) status = closer_(id_);
  id_ = -1;
  return status;
}

}  // namespace detail

// ---- Object: attributes ----------------------------------------------------

Object::~Object() {
  if (where_ && where_->parallel && std::uncaught_exceptions() > 0) handle_.release();
}

std::string Object::child_path(const std::string& name) const { return path_ == "/" ? "/" + name : path_ + "/" + name; }

void Object::fail(const std::string& what) const {
  const std::string reason = hdf5_reason();
  std::string message = where_->file + ": " + path_ + ": " + what;
  if (!reason.empty()) message += " (" + reason + ")";
  throw Error(where_->kind, message);
}

namespace {
// Creates (replacing) attribute `name` of `type` with a scalar dataspace and writes `value`.
void write_attribute(hid_t object, const std::string& name, hid_t file_type, hid_t memory_type, const void* value,
                     bool& ok) {
  if (H5Aexists(object, name.c_str()) > 0 && H5Adelete(object, name.c_str()) < 0) return;
  detail::Handle space(H5Screate(H5S_SCALAR), H5Sclose);
  detail::Handle attribute(H5Acreate2(object, name.c_str(), file_type, space.get(), H5P_DEFAULT, H5P_DEFAULT),
                           H5Aclose);
  ok = attribute.valid() && H5Awrite(attribute.get(), memory_type, value) >= 0 && attribute.reset() >= 0;
}
}  // namespace

void Object::set_attribute(const std::string& name, const std::string& value) {
  detail::Handle type(H5Tcopy(H5T_C_S1), H5Tclose);
  bool ok = type.valid() && H5Tset_size(type.get(), value.size() + 1) >= 0 &&
            H5Tset_strpad(type.get(), H5T_STR_NULLTERM) >= 0 && H5Tset_cset(type.get(), H5T_CSET_ASCII) >= 0;
  if (ok) {
    ok = false;
    write_attribute(id(), name, type.get(), type.get(), value.c_str(), ok);
  }
  if (!ok) fail("cannot write attribute '" + name + "'");
}

void Object::set_attribute(const std::string& name, std::int64_t value) {
  bool ok = false;
  write_attribute(id(), name, H5T_STD_I64LE, H5T_NATIVE_INT64, &value, ok);
  if (!ok) fail("cannot write attribute '" + name + "'");
}

void Object::set_attribute(const std::string& name, std::uint64_t value) {
  bool ok = false;
  write_attribute(id(), name, H5T_STD_U64LE, H5T_NATIVE_UINT64, &value, ok);
  if (!ok) fail("cannot write attribute '" + name + "'");
}

void Object::set_attribute(const std::string& name, double value) {
  bool ok = false;
  write_attribute(id(), name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, &value, ok);
  if (!ok) fail("cannot write attribute '" + name + "'");
}

bool Object::has_attribute(const std::string& name) const {
  const htri_t exists = H5Aexists(id(), name.c_str());
  if (exists < 0) fail("cannot look up attribute '" + name + "'");
  return exists > 0;
}

namespace {
// Opens attribute `name`, a scalar of class `wanted` (`kind` names it in the
// message), or throws through `fail`: absent, unreadable, of another class or
// holding more than one value are four different lines.
detail::Handle open_scalar_attribute(hid_t id, const std::string& name, H5T_class_t wanted, const char* kind,
                                     const std::function<void(const std::string&)>& fail) {
  const htri_t exists = H5Aexists(id, name.c_str());
  if (exists == 0) fail(fmt::format("no {} attribute '{}'", kind, name));
  detail::Handle attribute(exists > 0 ? H5Aopen(id, name.c_str(), H5P_DEFAULT) : H5I_INVALID_HID, H5Aclose);
  if (!attribute.valid()) fail("cannot open attribute '" + name + "'");
  detail::Handle type(H5Aget_type(attribute.get()), H5Tclose);
  if (!type.valid() || H5Tget_class(type.get()) != wanted) fail(fmt::format("attribute '{}' is not a {}", name, kind));
  detail::Handle space(H5Aget_space(attribute.get()), H5Sclose);
  if (H5Sget_simple_extent_npoints(space.get()) != 1) fail("attribute '" + name + "' is not a scalar");
  return attribute;
}
}  // namespace

std::string Object::string_attribute(const std::string& name, std::size_t most_bytes) const {
  auto attribute =
      open_scalar_attribute(id(), name, H5T_STRING, "string", [this](const std::string& what) { fail(what); });
  detail::Handle type(H5Aget_type(attribute.get()), H5Tclose);
  const auto too_long = [&](std::size_t bytes) {
    fail(fmt::format("attribute '{}' holds {} bytes, more than kpipe reads there ({})", name, bytes, most_bytes));
  };
  if (H5Tis_variable_str(type.get()) > 0) {
    char* text = nullptr;
    detail::Handle memory(H5Tcopy(H5T_C_S1), H5Tclose);
    H5Tset_size(memory.get(), H5T_VARIABLE);
    if (H5Aread(attribute.get(), memory.get(), &text) < 0) fail("cannot read attribute '" + name + "'");
    const std::size_t bytes = text ? std::strlen(text) : 0;
    std::string value = bytes <= most_bytes ? std::string(text ? text : "") : std::string();
    H5free_memory(text);
    if (bytes > most_bytes) too_long(bytes);
    return value;
  }
  const std::size_t size = H5Tget_size(type.get());
  if (size > most_bytes + 1) too_long(size);  // + 1: a fixed-size string may end in its terminator
  std::string buffer(size + 1, '\0');
  detail::Handle memory(H5Tcopy(H5T_C_S1), H5Tclose);
  H5Tset_size(memory.get(), size + 1);
  H5Tset_strpad(memory.get(), H5T_STR_NULLTERM);
  if (H5Aread(attribute.get(), memory.get(), buffer.data()) < 0) fail("cannot read attribute '" + name + "'");
  buffer.resize(std::strlen(buffer.c_str()));
  return buffer;
}

namespace {
template <class T>
T read_number(hid_t id, const std::string& name, H5T_class_t wanted, hid_t memory,
              const std::function<void(const std::string&)>& fail) {
  auto attribute = open_scalar_attribute(id, name, wanted, "numeric", fail);
  T value{};
  if (H5Aread(attribute.get(), memory, &value) < 0) fail("cannot read attribute '" + name + "'");
  return value;
}
}  // namespace

std::int64_t Object::int_attribute(const std::string& name) const {
  return read_number<std::int64_t>(id(), name, H5T_INTEGER, H5T_NATIVE_INT64,
                                   [this](const std::string& what) { fail(what); });
}

std::uint64_t Object::uint_attribute(const std::string& name) const {
  return read_number<std::uint64_t>(id(), name, H5T_INTEGER, H5T_NATIVE_UINT64,
                                    [this](const std::string& what) { fail(what); });
}

double Object::double_attribute(const std::string& name) const {
  return read_number<double>(id(), name, H5T_FLOAT, H5T_NATIVE_DOUBLE, [this](const std::string& what) { fail(what); });
}

// ---- Dataset -----------------------------------------------------------------

std::vector<std::uint64_t> Dataset::shape() const {
  detail::Handle space(H5Dget_space(id()), H5Sclose);
  const int rank = space.valid() ? H5Sget_simple_extent_ndims(space.get()) : -1;
  if (rank < 0) fail("cannot read the dataset's shape");
  std::vector<hsize_t> dims(static_cast<std::size_t>(rank));
  H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
  return {dims.begin(), dims.end()};
}

std::uint64_t Dataset::elements() const {
  std::uint64_t count = 1;
  for (auto extent : shape()) {
    if (__builtin_mul_overflow(count, extent, &count)) fail("declares more than 2^64 elements");
  }
  return count;
}

void Dataset::require_stored() const {
  detail::Handle type(H5Dget_type(id()), H5Tclose);
  detail::Handle creation(H5Dget_create_plist(id()), H5Pclose);
  if (!type.valid() || !creation.valid()) fail("cannot read the dataset's type and layout");
  std::uint64_t declared = 0;
  if (__builtin_mul_overflow(elements(), static_cast<std::uint64_t>(H5Tget_size(type.get())), &declared)) {
    fail("declares more than 2^64 bytes");
  }
  const std::uint64_t stored = H5Dget_storage_size(id());
  if (detail::stores_declared(declared, stored, H5Pget_nfilters(creation.get()) > 0)) return;
  std::string extents;
  for (auto extent : shape()) extents += (extents.empty() ? "" : " x ") + std::to_string(extent);
  fail(
      fmt::format("declares {} ({} bytes), but the file stores {} bytes of it; the file is truncated or the "
                  "dataset was never written",
                  extents, declared, stored));
}

bool Dataset::stored_verbatim() const {
  const Type stored = type();
  detail::Handle file_type(H5Dget_type(id()), H5Tclose);
  detail::Handle creation(H5Dget_create_plist(id()), H5Pclose);
  if (!file_type.valid() || !creation.valid()) fail("cannot read the dataset's type and layout");
  return H5Pget_layout(creation.get()) == H5D_CONTIGUOUS && H5Pget_nfilters(creation.get()) == 0 &&
         H5Tequal(file_type.get(), info(stored).native) > 0;
}

std::optional<Dataset::Bytes> Dataset::stored_bytes() const {
  if (!stored_verbatim()) return std::nullopt;
  const haddr_t offset = H5Dget_offset(id());
  if (offset == HADDR_UNDEF) return std::nullopt;  // not allocated: nothing stored
  return Bytes{offset, H5Dget_storage_size(id())};
}

Type Dataset::type() const {
  detail::Handle type(H5Dget_type(id()), H5Tclose);
  if (!type.valid()) fail("cannot read the dataset's type");
  const auto type_class = H5Tget_class(type.get());
  const auto size = H5Tget_size(type.get());
  if (type_class == H5T_FLOAT) {
    if (size == 2 && H5Tequal(type.get(), bfloat16_type()) > 0) return Type::bfloat16;
    if (size == 2 && H5Tequal(type.get(), float16_type()) > 0) return Type::float16;
    if (size == 4 || size == 8) return size == 4 ? Type::float32 : Type::float64;
    fail(fmt::format("holds {}-byte floats, which kpipe does not read (float32, float64, bfloat16 or float16)", size));
  }
  if (type_class == H5T_INTEGER) {
    if (size == 4) return Type::int32;
    return H5Tget_sign(type.get()) == H5T_SGN_NONE ? Type::uint64 : Type::int64;
  }
  fail("holds neither floats nor integers");
}

void Dataset::check_size(std::size_t size) const {
  if (size != elements())
    fail("cannot write " + std::to_string(size) + " values into a dataset of " + std::to_string(elements()));
}

namespace {
// The file and memory selections of rows [first, first + rows) of `dataset`.
struct Selection {
  detail::Handle file;
  detail::Handle memory;
};
Selection select_rows(hid_t dataset, std::uint64_t first, std::uint64_t rows) {
  Selection selection;
  selection.file = detail::Handle(H5Dget_space(dataset), H5Sclose);
  if (!selection.file.valid()) return selection;
  const int rank = H5Sget_simple_extent_ndims(selection.file.get());
  std::vector<hsize_t> dims(static_cast<std::size_t>(rank > 0 ? rank : 1), 1);
  H5Sget_simple_extent_dims(selection.file.get(), dims.data(), nullptr);
  std::vector<hsize_t> start(dims.size(), 0);
  std::vector<hsize_t> count = dims;
  start[0] = first;
  count[0] = rows;
  if (rows == 0) {
    H5Sselect_none(selection.file.get());
    const hsize_t one = 1;
    selection.memory = dataspace({one});
    H5Sselect_none(selection.memory.get());
    return selection;
  }
  if (first + rows > dims[0] ||
      H5Sselect_hyperslab(selection.file.get(), H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr) < 0) {
    selection.file.reset();
    return selection;
  }
  selection.memory = dataspace(count);
  return selection;
}

// Collective transfer in parallel files (every rank calls), default otherwise.
detail::Handle transfer(bool collective) {
  detail::Handle list(H5Pcreate(H5P_DATASET_XFER), H5Pclose);
  if (collective) H5Pset_dxpl_mpio(list.get(), H5FD_MPIO_COLLECTIVE);
  return list;
}
}  // namespace

void Dataset::write_rows_raw(Type type, const void* data, std::uint64_t first_row, std::uint64_t rows, Transfer mode) {
  auto selection = select_rows(id(), first_row, rows);
  if (!selection.file.valid() || !selection.memory.valid())
    fail("cannot select rows " + std::to_string(first_row) + "+" + std::to_string(rows));
  auto list = transfer(where_->parallel && mode == Transfer::collective);
  if (H5Dwrite(id(), info(type).native, selection.memory.get(), selection.file.get(), list.get(), data) < 0)
    fail(std::string("cannot write ") + name_of(type) + " data");
}

void Dataset::read_rows_raw(Type type, void* data, std::uint64_t first_row, std::uint64_t rows) const {
  if (rows == 0) return;
  auto selection = select_rows(id(), first_row, rows);
  if (!selection.file.valid() || !selection.memory.valid())
    fail("cannot select rows " + std::to_string(first_row) + "+" + std::to_string(rows));
  auto list = transfer(false);
  if (H5Dread(id(), info(type).native, selection.memory.get(), selection.file.get(), list.get(), data) < 0)
    fail(std::string("cannot read ") + name_of(type) + " data");
}

// ---- Group -------------------------------------------------------------------

Group Group::create_group(const std::string& name) {
  detail::Handle group(H5Gcreate2(id(), name.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose);
  if (!group.valid()) fail("cannot create group '" + name + "'");
  return Group(std::move(group), child_path(name), where_);
}

Group Group::open_group(const std::string& name) const {
  if (!has(name)) fail("no group '" + name + "'");
  require_stored_here(name);
  detail::Handle group(H5Gopen2(id(), name.c_str(), H5P_DEFAULT), H5Gclose);
  if (!group.valid()) fail("cannot open group '" + name + "'");
  return Group(std::move(group), child_path(name), where_);
}

void Group::require_stored_here(const std::string& name) const {
  H5L_info_t link{};
  if (H5Lget_info(id(), name.c_str(), &link, H5P_DEFAULT) < 0) fail("cannot look up '" + name + "'");
  if (link.type != H5L_TYPE_HARD) {
    fail("'" + name + "' is " + (link.type == H5L_TYPE_SOFT ? "a soft" : "an external") +
         " link; kpipe follows no links, it reads only objects stored in the file itself");
  }
}

bool Group::has(const std::string& name) const {
  const htri_t exists = H5Lexists(id(), name.c_str(), H5P_DEFAULT);
  if (exists < 0) fail("cannot look up '" + name + "'");
  return exists > 0;
}

std::vector<std::string> Group::names() const {
  std::vector<std::string> names;
  const herr_t status = H5Literate(
      id(), H5_INDEX_NAME, H5_ITER_INC, nullptr,
      [](hid_t, const char* name, const H5L_info_t*, void* data) -> herr_t {
        static_cast<std::vector<std::string>*>(data)->emplace_back(name);
        return 0;
      },
      &names);
  if (status < 0) fail("cannot list the group's members");
  return names;
}

Dataset Group::create_dataset(const std::string& name, Type type, const std::vector<std::uint64_t>& shape) {
  if (shape.empty() || shape.size() > 2) fail("dataset '" + name + "' must be 1-D or 2-D");
  auto space = dataspace({shape.begin(), shape.end()});
  // kpipe writes every dataset it creates whole: no fill values first
  // (parallel HDF5 allocates at creation, and would write the data twice).
  // Allocated at creation in every file, so stored_bytes() knows where the
  // data goes before it is written.
  detail::Handle creation(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
  H5Pset_fill_time(creation.get(), H5D_FILL_TIME_NEVER);
  H5Pset_alloc_time(creation.get(), H5D_ALLOC_TIME_EARLY);
  detail::Handle dataset(
      H5Dcreate2(id(), name.c_str(), info(type).stored, space.get(), H5P_DEFAULT, creation.get(), H5P_DEFAULT),
      H5Dclose);
  if (!dataset.valid()) fail("cannot create dataset '" + name + "'");
  return Dataset(std::move(dataset), child_path(name), where_);
}

Dataset Group::open_dataset(const std::string& name) const {
  if (!has(name)) fail("no dataset '" + name + "'");
  require_stored_here(name);
  detail::Handle dataset(H5Dopen2(id(), name.c_str(), H5P_DEFAULT), H5Dclose);
  if (!dataset.valid()) fail("cannot open dataset '" + name + "'");
  detail::Handle creation(H5Dget_create_plist(dataset.get()), H5Pclose);
  if (!creation.valid() || H5Pget_layout(creation.get()) == H5D_VIRTUAL) {
    fail("dataset '" + name + "' is virtual (it maps other files); kpipe reads only data stored in the file itself");
  }
  if (H5Pget_external_count(creation.get()) != 0) {
    fail("dataset '" + name +
         "' keeps its data in other files (external storage); kpipe reads only data stored in the file itself");
  }
  return Dataset(std::move(dataset), child_path(name), where_);
}

// ---- File --------------------------------------------------------------------

File File::make(const std::string& file_name, MPI_Comm comm, bool parallel, bool create, Exists exists) {
  silence_hdf5();
  auto where = std::make_shared<detail::Where>(
      detail::Where{file_name, create ? ErrorKind::runtime : ErrorKind::input, parallel});
  detail::Handle access(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
  if (parallel) H5Pset_fapl_mpio(access.get(), comm, MPI_INFO_NULL);
  detail::Handle file;
  if (create) {
    // Objects of 1 MiB or more start on a 1 MiB boundary: whole file-system
    // blocks and stripes for MPI-IO, for the price of at most 1 MiB each.
    H5Pset_alignment(access.get(), hsize_t{1} << 20, hsize_t{1} << 20);
    const unsigned flags = exists == Exists::fail ? H5F_ACC_EXCL : H5F_ACC_TRUNC;
    file = detail::Handle(H5Fcreate(file_name.c_str(), flags, H5P_DEFAULT, access.get()), H5Fclose);
  } else {
    // Opening a FIFO or a device would wait for a writer, or read forever: refuse them first.
    std::error_code error;
    const auto status = std::filesystem::status(file_name, error);
    if (!error && std::filesystem::exists(status) && !std::filesystem::is_regular_file(status)) {
      throw input_error(file_name + ": not a regular file (a directory, FIFO, device or socket); name an HDF5 file");
    }
    if (!parallel && std::filesystem::exists(status)) detail::check_in_child(file_name);
    file = detail::Handle(H5Fopen(file_name.c_str(), H5F_ACC_RDONLY, access.get()), H5Fclose);
  }
  if (!file.valid()) {
    const std::string reason = hdf5_reason();
    std::string message = file_name + ": " + (create ? "cannot create the HDF5 file" : "cannot open as an HDF5 file");
    if (!create && !is_hdf5(file_name))
      message = file_name + ": not an HDF5 file (or unreadable)";
    else if (!reason.empty())
      message += " (" + reason + ")";
    throw Error(where->kind, message);
  }
  return File(std::move(file), "/", std::move(where));
}

File File::create(const std::string& file_name, Exists exists) {
  return make(file_name, MPI_COMM_NULL, false, true, exists);
}
File File::create(const std::string& file_name, MPI_Comm comm, Exists exists) {
  return make(file_name, comm, true, true, exists);
}
File File::open(const std::string& file_name) { return make(file_name, MPI_COMM_NULL, false, false, Exists::fail); }
File File::open(const std::string& file_name, MPI_Comm comm) {
  return make(file_name, comm, true, false, Exists::fail);
}

void File::flush() {
  if (H5Fflush(id(), H5F_SCOPE_GLOBAL) < 0) fail("cannot flush");
}

void File::close() {
  if (!handle_.valid()) return;
  if (handle_.reset() < 0) fail("cannot close");
  if (where_->kind == ErrorKind::runtime) detail::trust_written(where_->file);  // written here: no walk to reopen
}

bool is_hdf5(const std::string& file_name) {
  // The signature sits at byte 0 (or 512, 1024, ... with a user block); kpipe writes none.
  static const unsigned char signature[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
  std::error_code error;
  if (!std::filesystem::is_regular_file(file_name, error)) return false;  // a FIFO would block the read
  std::FILE* file = std::fopen(file_name.c_str(), "rb");
  if (!file) return false;
  unsigned char head[8] = {};
  const bool ok = std::fread(head, 1, sizeof head, file) == sizeof head && std::memcmp(head, signature, 8) == 0;
  std::fclose(file);
  return ok;
}

}  // namespace kpipe::io::hdf5
