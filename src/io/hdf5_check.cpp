#include "hdf5_check.hpp"

#include "kpipe/io/hdf5.hpp"

#include <fmt/format.h>
#include <hdf5.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <tuple>
#include <vector>

#include "kpipe/core/error.hpp"
#include "kpipe/core/fault.hpp"
#include "kpipe/core/isolated.hpp"
#include "kpipe/core/limits.hpp"
#include "kpipe/core/log.hpp"
#include "kpipe/core/strings.hpp"

namespace kpipe::io::hdf5::detail {

namespace {

constexpr std::uint64_t block_bytes = std::uint64_t{4} << 20;
constexpr hsize_t largest_chunk_count = hsize_t{1} << 20;

// The walk is libhdf5 calls only; every failure it meets is the reader's to
// report, so it ignores them and goes on with the next object.
struct Closer {
  herr_t (*close)(hid_t);
  hid_t id;
  ~Closer() {
    if (id >= 0) close(id);
  }
};

bool fixed_size(hid_t type) { return H5Tdetect_class(type, H5T_VLEN) <= 0 && H5Tis_variable_str(type) <= 0; }

herr_t read_attribute(hid_t object, const char* name, const H5A_info_t*, void*) {
  H5Aexists(object, name);
  const Closer attribute{H5Aclose, H5Aopen(object, name, H5P_DEFAULT)};
  const Closer type{H5Tclose, H5Aget_type(attribute.id)};
  const Closer space{H5Sclose, H5Aget_space(attribute.id)};
  const hssize_t points = H5Sget_simple_extent_npoints(space.id);
  const std::size_t size = H5Tget_size(type.id);
  if (points <= 0 || size == 0 || static_cast<std::uint64_t>(points) > limits::attribute_bytes / size) return 0;
  if (fixed_size(type.id)) {
    std::vector<unsigned char> bytes(static_cast<std::size_t>(points) * size);
    H5Aread(attribute.id, type.id, bytes.data());
  } else if (H5Tis_variable_str(type.id) > 0) {
    const Closer text{H5Tclose, H5Tcopy(H5T_C_S1)};
    H5Tset_size(text.id, H5T_VARIABLE);
    std::vector<char*> strings(static_cast<std::size_t>(points), nullptr);
    if (H5Aread(attribute.id, text.id, strings.data()) >= 0)
      H5Dvlen_reclaim(text.id, space.id, H5P_DEFAULT, strings.data());
  }
  return 0;
}

void read_chunk_index(hid_t dataset, int rank) {
  hsize_t chunks = 0;
  if (H5Dget_num_chunks(dataset, H5S_ALL, &chunks) < 0) return;
  std::vector<hsize_t> offset(static_cast<std::size_t>(std::max(rank, 1)));
  for (hsize_t i = 0; i < std::min(chunks, largest_chunk_count); ++i) {
    unsigned filters = 0;
    haddr_t address = 0;
    hsize_t size = 0;
    H5Dget_chunk_info(dataset, H5S_ALL, i, offset.data(), &filters, &address, &size);
  }
}

// Every stored byte, in blocks of rows along the first dimension.
void read_data(hid_t dataset, hid_t type, hid_t space, int rank, bool filtered) {
  std::vector<hsize_t> extent(static_cast<std::size_t>(rank));
  H5Sget_simple_extent_dims(space, extent.data(), nullptr);
  std::uint64_t bytes = 0;
  if (__builtin_mul_overflow(static_cast<std::uint64_t>(H5Sget_simple_extent_npoints(space)), H5Tget_size(type),
                             &bytes)) {
    return;
  }
  const std::uint64_t stored = H5Dget_storage_size(dataset);
  if (stored == 0 || !stores_declared(bytes, stored, filtered)) return;
  if (rank == 0) {
    std::vector<unsigned char> value(bytes);
    H5Dread(dataset, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, value.data());
    return;
  }
  const std::uint64_t row_bytes = extent[0] == 0 ? 0 : bytes / extent[0];
  if (row_bytes == 0 || row_bytes > block_bytes) return;
  const hsize_t block_rows = block_bytes / row_bytes;
  std::vector<unsigned char> block(block_rows * row_bytes);
  std::vector<hsize_t> start(extent.size(), 0), count = extent;
  for (hsize_t first = 0; first < extent[0]; first += block_rows) {
    start[0] = first;
    count[0] = std::min(block_rows, extent[0] - first);
    const Closer slab{H5Sclose, H5Scopy(space)};
    const Closer memory{H5Sclose, H5Screate_simple(rank, count.data(), nullptr)};
    if (H5Sselect_hyperslab(slab.id, H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr) < 0) return;
    if (H5Dread(dataset, type, memory.id, slab.id, H5P_DEFAULT, block.data()) < 0) return;
  }
}

void read_dataset(hid_t dataset) {
  const Closer creation{H5Pclose, H5Dget_create_plist(dataset)};
  const Closer type{H5Tclose, H5Dget_type(dataset)};
  const Closer space{H5Sclose, H5Dget_space(dataset)};
  const H5D_layout_t layout = H5Pget_layout(creation.id);
  const int rank = H5Sget_simple_extent_ndims(space.id);
  // Data kept outside the file (virtual datasets, external storage) is not read: it may name a FIFO or a device.
  if (layout < 0 || layout == H5D_VIRTUAL || H5Pget_external_count(creation.id) != 0 || rank < 0) return;
  if (layout == H5D_CHUNKED) read_chunk_index(dataset, rank);
  if (fixed_size(type.id)) read_data(dataset, type.id, space.id, rank, H5Pget_nfilters(creation.id) > 0);
}

herr_t visit_object(hid_t root, const char* name, const H5O_info_t* info, void*) {
  const Closer object{H5Oclose, H5Oopen(root, name, H5P_DEFAULT)};
  if (object.id < 0) return 0;
  H5Aiterate2(object.id, H5_INDEX_NAME, H5_ITER_NATIVE, nullptr, read_attribute, nullptr);
  // Readers ask for attributes by name, found or not: a lookup walks the
  // object's messages on another path than the iteration above.
  H5Aexists(object.id, "kpipe-walk: an attribute no file has");
  if (info->type == H5O_TYPE_GROUP) H5Lexists(object.id, "kpipe-walk: a link no file has", H5P_DEFAULT);
  if (info->type == H5O_TYPE_DATASET) read_dataset(object.id);
  return 0;
}

// Hard links only: soft and external links lead nowhere the walk goes.
void walk(const std::string& file_name) {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  const Closer file{H5Fclose, H5Fopen(file_name.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT)};
  if (file.id < 0) return;
#if H5_VERSION_GE(1, 12, 0)
  H5Ovisit(file.id, H5_INDEX_NAME, H5_ITER_NATIVE, visit_object, nullptr, H5O_INFO_ALL);
#else
  H5Ovisit2(file.id, H5_INDEX_NAME, H5_ITER_NATIVE, visit_object, nullptr, H5O_INFO_ALL);
#endif
}

using FileIdentity = std::tuple<dev_t, ino_t, off_t, std::int64_t>;

// The file whose Rehearsal is alive on this thread (whose opens skip the walk).
thread_local const std::string* rehearsed_file = nullptr;

double child_seconds(double bytes) { return limits::hdf5_walk_seconds + bytes / limits::slowest_read_bytes_per_second; }

// Runs `work` reading `file_name` in a child; the test-only faults
// (KPIPE_FAULT=RANK:hdf5-crash, hdf5-stall) strike there.
IsolatedOutcome read_in_child(const std::function<void()>& work, double seconds) {
  return run_isolated(
      [&] {
        fault::inject(fault::Phase::hdf5_crash, log::rank());
        fault::inject(fault::Phase::hdf5_stall, log::rank());
        work();
      },
      seconds);
}

// The line refusing `file_name` when the child reading it crashed or ran out
// of time, else "".
std::string refusal(const std::string& file_name, const IsolatedOutcome& outcome, double seconds) {
  switch (outcome.end) {
    case IsolatedOutcome::End::crashed:
      return fmt::format(
          "{}: the HDF5 library crashed reading it ({}); the file is damaged: regenerate it or restore an intact copy",
          printable(file_name), outcome.message);
    case IsolatedOutcome::End::timed_out:
      return fmt::format(
          "{}: the HDF5 library did not finish reading it within {:.0f} s; the file is damaged (or its file system "
          "stalls): regenerate it or restore an intact copy",
          printable(file_name), seconds);
    default:
      return {};
  }
}

void warn_unchecked(const std::string& file_name, const IsolatedOutcome& outcome) {
  log::warning("cannot check the HDF5 file {} in a child process ({}); reading it unchecked", printable(file_name),
               outcome.message);
}

// The line that refuses the file, or "" when the walk finished.
std::string walk_in_child(const std::string& file_name, double bytes) {
  const double seconds = child_seconds(bytes);
  const IsolatedOutcome outcome = read_in_child([&] { walk(file_name); }, seconds);
  if (outcome.end == IsolatedOutcome::End::not_run) warn_unchecked(file_name, outcome);
  return refusal(file_name, outcome, seconds);
}

double size_of(const std::string& file_name) {
  struct stat status {};
  return ::stat(file_name.c_str(), &status) == 0 ? static_cast<double>(status.st_size) : 0.0;
}

FileIdentity identity_of(const struct stat& status) {
  return {status.st_dev, status.st_ino, status.st_size,
          std::int64_t{status.st_mtim.tv_sec} * 1000000000 + status.st_mtim.tv_nsec};
}

// Each file's verdict: empty when the walk finished (or this process wrote
// the file), else the line refusing it.
std::mutex verdicts_mutex;
std::map<FileIdentity, std::string> verdicts;

}  // namespace

void trust_written(const std::string& file_name) {
  struct stat status {};
  if (::stat(file_name.c_str(), &status) != 0) return;
  const std::lock_guard<std::mutex> lock(verdicts_mutex);
  verdicts[identity_of(status)] = "";
}

void check_in_child(const std::string& file_name) {
  if (rehearsed_file != nullptr && *rehearsed_file == file_name) return;
  struct stat status {};
  if (::stat(file_name.c_str(), &status) != 0) return;  // the open that follows says why
  const FileIdentity identity = identity_of(status);
  std::unique_lock<std::mutex> lock(verdicts_mutex);
  auto known = verdicts.find(identity);
  if (known == verdicts.end()) {
    lock.unlock();
    const std::string verdict = walk_in_child(file_name, static_cast<double>(status.st_size));
    lock.lock();
    known = verdicts.emplace(identity, verdict).first;
  }
  if (!known->second.empty()) throw input_error(known->second);
}

}  // namespace kpipe::io::hdf5::detail

namespace kpipe::io::hdf5 {

Rehearsal::Rehearsal(const std::string& file_name, const std::function<void()>& read, Then then)
    : file_name_(file_name), previous_(detail::rehearsed_file) {
  const double seconds = detail::child_seconds(detail::size_of(file_name_));
  const IsolatedOutcome outcome = detail::read_in_child(
      [&] {
        detail::rehearsed_file = &file_name_;
        read();
        if (then == Then::walk) detail::walk(file_name_);
      },
      seconds);
  switch (outcome.end) {
    case IsolatedOutcome::End::refused:
      throw input_error(outcome.message);
    case IsolatedOutcome::End::crashed:
    case IsolatedOutcome::End::timed_out:
      throw input_error(detail::refusal(file_name_, outcome, seconds));
    case IsolatedOutcome::End::not_run:
      detail::warn_unchecked(file_name_, outcome);
      break;
    default:
      // Finished, or failed with another error than an input error: the read
      // here ends the same way, and throws that error with its own type.
      break;
  }
  detail::rehearsed_file = &file_name_;
}

Rehearsal::~Rehearsal() { detail::rehearsed_file = previous_; }

}  // namespace kpipe::io::hdf5
