#include "kpipe/io/checkpoint.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>
// xxHash, header-only: the checksum is inlined here and adds no library to link.
#define XXH_INLINE_ALL
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <sstream>
#include <string_view>
#include <tuple>

#include "kpipe/core/clock.hpp"
#include "kpipe/core/error.hpp"
#include "kpipe/core/fault.hpp"
#include "kpipe/core/isolated.hpp"
#include "kpipe/core/version.hpp"
#include "kpipe/io/hdf5.hpp"
#include "kpipe/io/uncached_file.hpp"

namespace kpipe::io {

namespace {

namespace fs = std::filesystem;
using hdf5::Dataset;
using hdf5::File;

// How a checksum is named in the file and computed: XXH3-64 since format
// 1.2.0, FNV-1a 64 before.
struct ChecksumKind {
  const char* attribute;
  std::uint64_t (*of)(const void* data, std::size_t size);
  bool xxh3;
};

constexpr std::uint64_t fnv1a64_start = 0xcbf29ce484222325ull;

// FNV-1a 64 of `size` more bytes, from `hash` so far.
std::uint64_t fnv1a64_continue(std::uint64_t hash, const void* data, std::size_t size) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < size; ++i) {
    hash ^= bytes[i];
    hash *= 0x100000001b3ull;
  }
  return hash;
}

std::uint64_t fnv1a64(const void* data, std::size_t size) { return fnv1a64_continue(fnv1a64_start, data, size); }

constexpr ChecksumKind xxh3_64{"xxh3_64", checksum64, true};
constexpr ChecksumKind legacy_fnv1a64{"fnv1a64", fnv1a64, false};

// A checksum of bytes handed in pieces, in order: `kind.of` over all of them at once.
class RunningChecksum {
 public:
  explicit RunningChecksum(const ChecksumKind& kind) : xxh3_(kind.xxh3) { XXH3_64bits_reset(&state_); }
  void add(const void* data, std::size_t size) {
    if (xxh3_) {
      XXH3_64bits_update(&state_, data, size);
    } else {
      fnv_ = fnv1a64_continue(fnv_, data, size);
    }
  }
  std::uint64_t value() const { return xxh3_ ? XXH3_64bits_digest(&state_) : fnv_; }

 private:
  bool xxh3_;
  XXH3_state_t state_;
  std::uint64_t fnv_ = fnv1a64_start;
};

// Runs `work` on rank 0 only; every rank throws a runtime error when it failed there.
template <class Work>
void on_root(const SharedFileRanks& ranks, Work&& work) {
  std::string failure;
  if (ranks.rank() == 0) {
    try {
      work();
    } catch (const std::exception& error) {
      failure = error.what();
      if (failure.empty()) failure = "failed";
    }
  }
  failure = ranks.broadcast(failure);
  if (!failure.empty()) throw SharedFileError(ErrorKind::runtime, failure);
}

// ---- names and shapes ----------------------------------------------------------

// A tensor as a rank lists it to the others: its shape and, in a write, the
// checksum of its bytes (0 where it only names the tensor).
struct Listed {
  ModelShape shape;
  std::uint64_t checksum = 0;
};

std::string serialise(const std::vector<Listed>& tensors) {
  std::string text;
  for (const auto& t : tensors)
    text += fmt::format("{}\t{}\t{}\t{}\n", t.shape.name, t.shape.rows, t.shape.cols, t.checksum);
  return text;
}

std::vector<Listed> parse(std::istream& lines) {
  std::vector<Listed> tensors;
  for (std::string line; std::getline(lines, line);) {
    Listed t;
    const auto tab1 = line.find('\t');
    const auto tab2 = line.find('\t', tab1 + 1);
    const auto tab3 = line.find('\t', tab2 + 1);
    t.shape.name = line.substr(0, tab1);
    t.shape.rows = std::stoll(line.substr(tab1 + 1, tab2 - tab1 - 1));
    t.shape.cols = std::stoll(line.substr(tab2 + 1, tab3 - tab2 - 1));
    t.checksum = std::stoull(line.substr(tab3 + 1));
    tensors.push_back(std::move(t));
  }
  return tensors;
}

std::string shape_text(std::int64_t rows, std::int64_t cols) { return fmt::format("{}x{}", rows, cols); }

// A tensor of the union of every rank's list: how many ranks list it, the
// last of them, and its checksum there.
struct Entry {
  Listed tensor;
  int holders = 0;
  int holder = -1;
};

// The union by name, sorted; the same on every rank given the same lists.
std::vector<Entry> union_of(const std::vector<std::vector<Listed>>& lists) {
  std::map<std::string, Entry> unique;
  for (std::size_t rank = 0; rank < lists.size(); ++rank) {
    for (const Listed& t : lists[rank]) {
      auto [it, inserted] = unique.emplace(t.shape.name, Entry{t, 0, -1});
      const ModelShape& first = it->second.tensor.shape;
      if (first.rows != t.shape.rows || first.cols != t.shape.cols) {
        throw SharedFileError(ErrorKind::runtime,
                              fmt::format("ranks disagree on the shape of {}: {} and {}", t.shape.name,
                                          shape_text(first.rows, first.cols), shape_text(t.shape.rows, t.shape.cols)));
      }
      ++it->second.holders;
      it->second.holder = static_cast<int>(rank);
      it->second.tensor.checksum = t.checksum;
    }
  }
  std::vector<Entry> entries;
  for (auto& [name, entry] : unique) entries.push_back(std::move(entry));
  return entries;
}

template <class Scalar>
ModelShape shape_of(const std::string& group, const NamedMatrix<Scalar>& tensor) {
  return {group + "/" + tensor.name, static_cast<std::int64_t>(tensor.value.extent(0)),
          static_cast<std::int64_t>(tensor.value.extent(1))};
}

// ---- the write ---------------------------------------------------------------------

// A tensor this rank writes: its host copy.
template <class Scalar>
struct Local {
  Kokkos::View<Scalar**, Kokkos::LayoutRight, Kokkos::HostSpace> host;
};

void sync_path(const std::string& path, int flags) {
  const int fd = ::open(path.c_str(), flags);
  if (fd < 0 || ::fsync(fd) != 0) {
    const int error = errno;
    if (fd >= 0) ::close(fd);
    throw runtime_error(fmt::format("{}: cannot sync to disk: {}", path, std::strerror(error)));
  }
  ::close(fd);
}

// write_checkpoint's temporary name: the final name, then mkstemp's six random characters.
constexpr std::string_view temporary_suffix = ".tmp-XXXXXX";

// The regular files of `directory` named "step-<N><tail>", by N; an 'X' in
// `tail` stands for any character (mkstemp's).
std::vector<std::pair<std::int64_t, fs::path>> step_files(const std::string& directory, std::string_view tail) {
  const auto tail_matches = [tail](std::string_view end) {
    return std::equal(tail.begin(), tail.end(), end.begin(), [](char t, char c) { return t == 'X' || t == c; });
  };
  std::vector<std::pair<std::int64_t, fs::path>> found;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(directory, error)) {
    const std::string name = entry.path().filename().string();
    if (name.size() <= 5 + tail.size() || name.compare(0, 5, "step-") != 0 ||
        !tail_matches(std::string_view(name).substr(name.size() - tail.size()))) {
      continue;
    }
    const std::string digits = name.substr(5, name.size() - 5 - tail.size());
    if (digits.size() > 18 || !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
      continue;
    if (entry.is_regular_file(error)) found.emplace_back(std::stoll(digits), entry.path());
  }
  std::sort(found.begin(), found.end());
  return found;
}

// step-<N>.h5 files of `directory`, by N.
std::vector<std::pair<std::int64_t, fs::path>> checkpoints_in(const std::string& directory) {
  return step_files(directory, ".h5");
}

// Whether `path` is a checkpoint kpipe wrote: an HDF5 file whose root says so
// (anything File::open or the attribute refuses is not).
bool written_by_kpipe(const fs::path& path) {
  if (!starts_as_checkpoint(path.string())) return false;
  try {
    return File::open(path.string()).string_attribute("format") == checkpoint_format;
  } catch (const Error&) {
    return false;
  }
}

// checkpoint.keep: removes the oldest of kpipe's checkpoints in `directory`
// up to step `newest` (the one just written), so that `keep` of them stay.
// A file kpipe did not write, or one of a later step (another run's), is
// never removed, and never makes kpipe remove its own.
void prune(const std::string& directory, std::int64_t newest, int keep) {
  std::vector<std::string> ours;
  for (const CheckpointFile& file : kpipe_checkpoints(directory)) {
    if (file.step <= newest) ours.push_back(file.path);
  }
  const std::size_t kept = static_cast<std::size_t>(std::max(keep, 1));
  for (std::size_t i = 0; i + kept < ours.size(); ++i) {
    std::error_code error;
    fs::remove(ours[i], error);
  }
}

// The checksum of the root attributes a restart uses, in a fixed text form.
std::uint64_t attributes_checksum(const CheckpointInfo& info, std::int64_t data_cursor, const ChecksumKind& kind) {
  const std::string text = fmt::format(
      "step={}\ndata_cursor={}\noptimizer_steps={}\nstages={}\nvirtual_stages={}\ndata_parallel={}\n"
      "schedule={}\ndeck={}",
      info.step, data_cursor, info.optimizer_steps, info.stages, info.virtual_stages, info.data_parallel, info.schedule,
      info.deck);
  // Files without a loss scale keep the text (and checksum) of format 1.2.
  const std::string scale =
      info.loss_scale
          ? fmt::format("\nloss_scale={}\nloss_scale_good_steps={}\nloss_scale_hysteresis={}", info.loss_scale->scale,
                        info.loss_scale->good_steps, info.loss_scale->hysteresis_left)
          : std::string();
  const std::string all = text + scale;
  return kind.of(all.data(), all.size());
}

void write_root_attributes(File& file, const CheckpointInfo& info, const std::string& date) {
  file.set_attribute("format", checkpoint_format);
  file.set_attribute("format_version", checkpoint_format_version);
  file.set_attribute("software", "kpipe");
  file.set_attribute("software_version", version_string);
  file.set_attribute("date", date);
  file.set_attribute("schema_version", checkpoint_schema_version);
  file.set_attribute("step", info.step);
  // The data stream is a pure function of (data.seed, step): the step is the cursor.
  file.set_attribute("data_cursor", info.step);
  file.set_attribute("optimizer_steps", info.optimizer_steps);
  file.set_attribute("deck", info.deck);
  file.set_attribute("stages", std::int64_t{info.stages});
  file.set_attribute("virtual_stages", std::int64_t{info.virtual_stages});
  file.set_attribute("data_parallel", std::int64_t{info.data_parallel});
  file.set_attribute("schedule", info.schedule);
  if (info.loss_scale) {
    file.set_attribute("loss_scale", info.loss_scale->scale);
    file.set_attribute("loss_scale_good_steps", info.loss_scale->good_steps);
    file.set_attribute("loss_scale_hysteresis", info.loss_scale->hysteresis_left);
  }
  file.set_attribute(xxh3_64.attribute, attributes_checksum(info, info.step, xxh3_64));
}

// Creates every dataset (on every rank alike, in `order`, which is the
// order of their bytes in the file) and writes this rank's; groups and
// datasets close here, before the file (HDF5 refuses to close a file with
// open objects under MPI-IO).
template <class Scalar>
void write_tensors(File& file, UncachedFile& bytes, const std::vector<Entry>& entries,
                   const std::vector<std::size_t>& order, const std::vector<Local<Scalar>>& local, int fault_rank) {
  auto parameter_group = file.create_group("parameters");
  auto optimizer_group = file.create_group("optimizer");
  for (std::size_t n = 0; n < order.size(); ++n) {
    const std::size_t i = order[n];
    const ModelShape& shape = entries[i].tensor.shape;
    const auto slash = shape.name.find('/');
    auto& group = shape.name.compare(0, slash, "parameters") == 0 ? parameter_group : optimizer_group;
    auto dataset =
        group.create_dataset(shape.name.substr(slash + 1), hdf5::type_of<Scalar>(),
                             {static_cast<std::uint64_t>(shape.rows), static_cast<std::uint64_t>(shape.cols)});
    // One rank holds each tensor whole and writes it alone: no aggregator in
    // between, and where libhdf5 would copy it verbatim, no libhdf5 either.
    if (local[i].host.data() != nullptr) {
      const auto stored = dataset.stored_bytes();
      const std::uint64_t size = local[i].host.span() * sizeof(Scalar);
      if (stored && stored->size == size) {
        bytes.write(stored->offset, size, local[i].host.data());
      } else {
        dataset.write_alone(local[i].host.data());
      }
    }
    dataset.set_attribute(xxh3_64.attribute, entries[i].tensor.checksum);
    // Test-only: a rank failing half-way through must leave the previous checkpoint intact.
    if (n == order.size() / 2) {
      fault::inject(fault::Phase::checkpoint, fault_rank);
      fault::inject(fault::Phase::checkpoint_stall, fault_rank);
    }
  }
}

}  // namespace

std::uint64_t checksum64(const void* data, std::size_t size) { return XXH3_64bits(data, size); }

std::vector<CheckpointFile> kpipe_checkpoints(const std::string& directory) {
  std::vector<CheckpointFile> ours;
  for (const auto& [step, path] : checkpoints_in(directory)) {
    if (written_by_kpipe(path)) ours.push_back({step, path.string()});
  }
  return ours;
}

std::vector<CheckpointFile> step_checkpoints(const std::string& directory) {
  std::vector<CheckpointFile> all;
  for (const auto& [step, path] : checkpoints_in(directory)) all.push_back({step, path.string()});
  return all;
}

bool starts_as_checkpoint(const std::string& path) {
  constexpr char signature[8] = {'\x89', 'H', 'D', 'F', '\r', '\n', '\x1a', '\n'};
  char head[sizeof signature] = {};
  std::ifstream file(path, std::ios::binary);
  return file.read(head, sizeof head) && std::equal(std::begin(head), std::end(head), std::begin(signature));
}

std::vector<std::string> unfinished_checkpoints(const std::string& directory) {
  std::vector<std::string> found;
  for (const auto& [step, path] : step_files(directory, ".h5" + std::string(temporary_suffix))) {
    found.push_back(path.string());
  }
  return found;
}

std::string checkpoint_file(const std::string& directory, std::int64_t step) {
  return (fs::path(directory) / fmt::format("step-{}.h5", step)).string();
}

std::vector<ModelShape> all_model_shapes(const SharedFileRanks& ranks, const std::vector<ModelShape>& mine) {
  std::vector<Listed> listed;
  for (const auto& shape : mine) listed.push_back({shape, 0});
  std::vector<std::vector<Listed>> lists;
  for (const std::string& text : ranks.all_gather(serialise(listed))) {
    std::istringstream lines(text);
    lists.push_back(parse(lines));
  }
  std::vector<ModelShape> shapes;
  for (auto& entry : union_of(lists)) shapes.push_back(std::move(entry.tensor.shape));
  return shapes;
}

template <class Scalar>
std::string write_checkpoint(const SharedFileRanks& ranks, const std::string& directory, const CheckpointInfo& info,
                             const std::vector<NamedMatrix<Scalar>>& parameters,
                             const std::vector<NamedMatrix<Scalar>>& optimizer_state, int keep, int fault_rank,
                             double deadline_seconds) {
  const auto started = std::chrono::steady_clock::now();
  // This rank's tensors: their host copies and checksums.
  std::map<std::string, Local<Scalar>> mine;
  std::vector<Listed> listed;
  for (const auto& [group, tensors] :
       {std::pair{"parameters", &parameters}, std::pair{"optimizer", &optimizer_state}}) {
    for (const auto& tensor : *tensors) {
      const ModelShape shape = shape_of(group, tensor);
      auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), tensor.value);
      listed.push_back({shape, checksum64(host.data(), host.span() * sizeof(Scalar))});
      mine[shape.name].host = host;
    }
  }
  // Every rank must create every dataset alike: one gather agrees on the
  // list, who writes what, and the shortest deadline.
  const double my_deadline = deadline_seconds > 0.0 ? deadline_seconds : std::numeric_limits<double>::infinity();
  double deadline = my_deadline;
  std::vector<std::vector<Listed>> lists;
  for (const std::string& text : ranks.all_gather(fmt::format("{}\n", my_deadline) + serialise(listed))) {
    std::istringstream lines(text);
    std::string first;
    std::getline(lines, first);
    deadline = std::min(deadline, std::stod(first));
    lists.push_back(parse(lines));
  }
  const std::vector<Entry> entries = union_of(lists);
  std::vector<Local<Scalar>> local(entries.size());
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const std::string& name = entries[i].tensor.shape.name;
    if (entries[i].holders != 1) {
      throw SharedFileError(
          ErrorKind::runtime,
          fmt::format("checkpoint: {} ranks hold {} for writing; exactly one must", entries[i].holders, name));
    }
    if (entries[i].holder == ranks.rank()) local[i] = mine.at(name);
  }
  // Each rank's tensors side by side in the file: a restart on the same
  // layout reads one stretch per rank, which the kernel's read-ahead follows.
  std::vector<std::size_t> order(entries.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return entries[a].holder < entries[b].holder; });

  // A unique temporary name next to the final one, made by rank 0 (mkstemp), with the date.
  const std::string final_name = checkpoint_file(directory, info.step);
  std::string temporary;
  std::string date;
  on_root(ranks, [&] {
    std::string pattern = final_name + std::string(temporary_suffix);
    const int fd = ::mkstemp(pattern.data());
    if (fd < 0) throw runtime_error(fmt::format("{}: cannot create: {}", pattern, std::strerror(errno)));
    // mkstemp makes the file private (0600); a checkpoint gets the umask's usual permissions.
    const mode_t mask = ::umask(0);
    ::umask(mask);
    ::fchmod(fd, 0666 & ~mask);
    ::close(fd);
    temporary = pattern;
    date = utc_timestamp();
  });
  temporary = ranks.broadcast(temporary);
  date = ranks.broadcast(date);

  {
    File file = File::create(temporary, ranks.communicator(), File::Exists::truncate);
    UncachedFile bytes(temporary, UncachedFile::Access::write);
    write_root_attributes(file, info, date);
    write_tensors(file, bytes, entries, order, local, fault_rank);
    file.close();
  }

  // Complete on every rank: rank 0 syncs the data, renames, syncs the directory, prunes.
  on_root(ranks, [&] {
    // Past the shortest deadline a peer's watchdog is ending the job. A rank
    // stopped inside the write and woken by that end (Open MPI sends SIGCONT,
    // then SIGTERM, which kpipe takes as a preemption) finishes the file with
    // the peer's last collective contributions: it must not publish it.
    try {
      const std::chrono::duration<double> took = std::chrono::steady_clock::now() - started;
      if (took.count() > deadline) {
        throw runtime_error(
            fmt::format("checkpoint: writing {} took {:.1f} s, past its {:.1f} s deadline (a peer's "
                        "watchdog is ending the job); not published",
                        final_name, took.count(), deadline));
      }
      sync_path(temporary, O_RDONLY);
      if (std::rename(temporary.c_str(), final_name.c_str()) != 0) {
        throw runtime_error(fmt::format("cannot rename {} to {}: {}", temporary, final_name, std::strerror(errno)));
      }
    } catch (...) {
      std::remove(temporary.c_str());  // this write's own file, which nothing will read
      throw;
    }
    sync_path(directory.empty() ? "." : directory, O_RDONLY | O_DIRECTORY);
    prune(directory, info.step, keep);
  });
  return final_name;
}

// ---- the read ------------------------------------------------------------------------

namespace {

// Bytes per block when a dataset is read in blocks.
constexpr std::uint64_t block_bytes = std::uint64_t{8} << 20;

// Reads `dataset` as T in blocks of whole rows (about block_bytes), each into
// `into` at its rows' place when given (a host buffer of the whole dataset),
// else into `scratch`, which the caller keeps from one dataset to the next:
// then reading a dataset of any size allocates nothing and faults in no fresh
// pages. A dataset libhdf5 would copy verbatim comes through `bytes` when
// given (past the page cache), any other through libhdf5. Calls
// sink(first_row, values, rows) on each block in order and returns the
// checksum of all of it, as `kind.of` would over the whole dataset, each
// block hashed while the cache still holds it.
template <class T, class Sink>
std::uint64_t read_in_blocks(const Dataset& dataset, UncachedFile* bytes, const ChecksumKind& kind,
                             std::vector<unsigned char>& scratch, const Sink& sink, T* into = nullptr) {
  dataset.require_stored();
  const auto extent = dataset.shape();
  if (extent.empty()) {
    const auto values = dataset.read<T>();  // refuses a scalar, where rows are expected
    return kind.of(values.data(), values.size() * sizeof(T));
  }
  RunningChecksum checksum(kind);
  const std::uint64_t rows = extent.front();
  if (rows == 0 || dataset.elements() == 0) return checksum.value();
  const std::uint64_t row_values = dataset.elements() / rows, row_bytes = row_values * sizeof(T);
  const std::uint64_t block_rows = std::max<std::uint64_t>(1, block_bytes / row_bytes);
  if (!into && scratch.size() < block_rows * row_bytes) scratch.resize(block_rows * row_bytes);
  auto stored = bytes ? dataset.stored_bytes() : std::nullopt;
  if (stored && stored->size != rows * row_bytes) stored.reset();
  for (std::uint64_t first = 0; first < rows; first += block_rows) {
    const std::uint64_t count = std::min(block_rows, rows - first);
    T* const values = into ? into + first * row_values : reinterpret_cast<T*>(scratch.data());
    if (stored) {
      bytes->read(stored->offset + first * row_bytes, count * row_bytes, values);
    } else {
      dataset.read_rows(values, first, count);
    }
    checksum.add(values, count * row_bytes);
    sink(first, values, count);
  }
  return checksum.value();
}

void verify(const std::string& file, const Dataset& dataset, const ChecksumKind& kind, std::uint64_t computed) {
  const std::uint64_t stored = dataset.uint_attribute(kind.attribute);
  if (stored != computed) {
    throw input_error(
        fmt::format("{}: {} is corrupt: its checksum is {:016x}, the file says {:016x}; restart from an "
                    "earlier checkpoint",
                    file, dataset.path(), computed, stored));
  }
}

// read(T{}) with T the element type of `dataset`.
template <class Read>
auto with_element_type(const Dataset& dataset, const Read& read) {
  switch (dataset.type()) {
    case hdf5::Type::float32:
      return read(float{});
    case hdf5::Type::float64:
      return read(double{});
    case hdf5::Type::int32:
      return read(std::int32_t{});
    case hdf5::Type::int64:
      return read(std::int64_t{});
    case hdf5::Type::uint64:
      return read(std::uint64_t{});
    case hdf5::Type::bfloat16:
      return read(tensor::BFloat16{});
    case hdf5::Type::float16:
      return read(tensor::Half{});
  }
  return read(float{});
}

// The checksum of `dataset`, read through `scratch`.
std::uint64_t checksum_of(const Dataset& dataset, UncachedFile* bytes, const ChecksumKind& kind,
                          std::vector<unsigned char>& scratch) {
  return with_element_type(dataset, [&](auto type) {
    return read_in_blocks<decltype(type)>(dataset, bytes, kind, scratch,
                                          [](std::uint64_t, const auto*, std::uint64_t) {});
  });
}

// What hdf5::Rehearsal's child does with a dataset the rank then reads and
// verifies itself: where the rank reads the bytes without libhdf5 (stored
// verbatim), the libhdf5 calls around them only, so a file that crashes
// libhdf5 there does so in the child, and the rank's read is the one pass
// over the bytes; otherwise all of it, verified.
void rehearse(const std::string& file, const Dataset& dataset, const ChecksumKind& kind,
              std::vector<unsigned char>& scratch) {
  if (!dataset.stored_bytes()) return verify(file, dataset, kind, checksum_of(dataset, nullptr, kind, scratch));
  dataset.require_stored();
  if (dataset.shape().empty()) {
    with_element_type(dataset, [&](auto type) { (void)dataset.read<decltype(type)>(); });  // refuses a scalar
  }
  (void)dataset.elements();
}

void check_format(const std::string& file, const File& checkpoint) {
  if (!checkpoint.has_attribute("format") || checkpoint.string_attribute("format") != checkpoint_format) {
    throw input_error(fmt::format("{}: an HDF5 file, but not a kpipe checkpoint (no format = \"{}\" attribute)", file,
                                  checkpoint_format));
  }
  const auto schema = checkpoint.int_attribute("schema_version");
  if (schema != checkpoint_schema_version) {
    throw input_error(fmt::format(
        "{}: checkpoint schema version {} (written by kpipe {}); this kpipe {} reads version "
        "{} only",
        file, schema, checkpoint.string_attribute("software_version"), version_string, checkpoint_schema_version));
  }
}

// One line naming the first difference between the checkpoint's parameters and the model's.
void check_model(const std::string& file, const File& checkpoint, const std::vector<ModelShape>& model) {
  const auto group = checkpoint.open_group("parameters");
  const auto names = group.names();
  const auto prefix = fmt::format("{}: the checkpoint holds another model than the deck: ", file);
  for (const auto& shape : model) {
    if (!std::binary_search(names.begin(), names.end(), shape.name)) {
      throw input_error(prefix + fmt::format("{} is in the deck but not in the checkpoint", shape.name));
    }
    const auto stored = group.open_dataset(shape.name).shape();
    if (stored.size() != 2 || static_cast<std::int64_t>(stored[0]) != shape.rows ||
        static_cast<std::int64_t>(stored[1]) != shape.cols) {
      const std::string in_file =
          stored.size() == 2 ? shape_text(static_cast<std::int64_t>(stored[0]), static_cast<std::int64_t>(stored[1]))
                             : "not a matrix";
      throw input_error(prefix + fmt::format("{} is {} in the checkpoint but {} in the deck", shape.name, in_file,
                                             shape_text(shape.rows, shape.cols)));
    }
  }
  for (const auto& name : names) {
    const auto known = std::find_if(model.begin(), model.end(), [&](const ModelShape& s) { return s.name == name; });
    if (known == model.end()) {
      throw input_error(prefix + fmt::format("{} is in the checkpoint but not in the deck", name));
    }
  }
}

// `tensor`'s dataset in `group`, once it is known to fit the tensor.
template <class Scalar>
Dataset dataset_for(const std::string& file, const hdf5::Group& group, const NamedMatrix<Scalar>& tensor,
                    const char* what) {
  if (!group.has(tensor.name)) {
    throw input_error(
        fmt::format("{}: holds no {} {} (was it written with another train.optimizer?)", file, what, tensor.name));
  }
  auto dataset = group.open_dataset(tensor.name);
  const auto shape = dataset.shape();
  const auto rows = static_cast<std::int64_t>(tensor.value.extent(0));
  const auto cols = static_cast<std::int64_t>(tensor.value.extent(1));
  if (shape.size() != 2 || static_cast<std::int64_t>(shape[0]) != rows || static_cast<std::int64_t>(shape[1]) != cols) {
    throw input_error(fmt::format("{}: {} has another shape in the checkpoint than the run's {}", file, dataset.path(),
                                  shape_text(rows, cols)));
  }
  if (dataset.type() != hdf5::type_of<Scalar>()) {
    throw input_error(fmt::format("{}: {} holds {}, the run computes in {}", file, dataset.path(),
                                  hdf5::name_of(dataset.type()), hdf5::name_of(hdf5::type_of<Scalar>())));
  }
  return dataset;
}

// Reads `dataset` into `tensor` and verifies its checksum when given the
// file's `bytes`; otherwise rehearses the read (hdf5::Rehearsal's child must
// not touch Kokkos).
template <class Scalar>
void load(const std::string& file, const Dataset& dataset, const NamedMatrix<Scalar>& tensor, const ChecksumKind& kind,
          UncachedFile* bytes, std::vector<unsigned char>& scratch) {
  if (!bytes) return rehearse(file, dataset, kind, scratch);
  // A tensor in host memory is read in place (a read that fails its checksum
  // ends the restart, and a restart overwrites every tensor it loads).
  // Otherwise the dataset passes through `scratch` into the tensor's rows.
  using Space = typename tensor::Matrix<Scalar>::memory_space;
  if (Kokkos::SpaceAccessibility<Kokkos::HostSpace, Space>::accessible) {
    const auto in_place = [](std::uint64_t, const Scalar*, std::uint64_t) {};
    return verify(file, dataset, kind,
                  read_in_blocks<Scalar>(dataset, bytes, kind, scratch, in_place, tensor.value.data()));
  }
  const auto into_tensor = [&](std::uint64_t first, const Scalar* values, std::uint64_t count) {
    using HostRows =
        Kokkos::View<const Scalar**, Kokkos::LayoutRight, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
    const auto begin = static_cast<std::int64_t>(first), end = begin + static_cast<std::int64_t>(count);
    Kokkos::deep_copy(Kokkos::subview(tensor.value, std::make_pair(begin, end), Kokkos::ALL),
                      HostRows(values, static_cast<std::size_t>(count), tensor.value.extent(1)));
  };
  verify(file, dataset, kind, read_in_blocks<Scalar>(dataset, bytes, kind, scratch, into_tensor));
}

// The whole read but the regular-file check: it is rehearsed (hdf5::Rehearsal).
template <class Scalar>
CheckpointInfo read_file(const std::string& file, const std::vector<ModelShape>& model,
                         const std::vector<NamedMatrix<Scalar>>& parameters,
                         const std::vector<NamedMatrix<Scalar>>& optimizer_state, int share, int shares, bool copy) {
  const File checkpoint = File::open(file);
  check_format(file, checkpoint);
  check_model(file, checkpoint, model);

  CheckpointInfo info;
  // Counts of steps a run can have taken (train.steps is an int).
  info.step = checkpoint.int_attribute("step");
  info.optimizer_steps = checkpoint.int_attribute("optimizer_steps");
  constexpr std::int64_t most_steps = std::numeric_limits<int>::max();
  if (info.step < 0 || info.step > most_steps || info.optimizer_steps < 0 || info.optimizer_steps > most_steps) {
    throw input_error(
        fmt::format("{}: the attributes step = {} and optimizer_steps = {} are not step counts (0 to "
                    "{}); the file was altered, restart from another checkpoint",
                    file, info.step, info.optimizer_steps, most_steps));
  }
  info.deck = checkpoint.string_attribute("deck");
  info.stages = static_cast<int>(checkpoint.int_attribute("stages"));
  info.virtual_stages = static_cast<int>(checkpoint.int_attribute("virtual_stages"));
  info.data_parallel = static_cast<int>(checkpoint.int_attribute("data_parallel"));
  info.schedule = checkpoint.string_attribute("schedule");
  info.software_version = checkpoint.string_attribute("software_version");
  if (checkpoint.has_attribute("loss_scale")) {
    info.loss_scale =
        LossScaleState{checkpoint.double_attribute("loss_scale"), checkpoint.int_attribute("loss_scale_good_steps"),
                       checkpoint.int_attribute("loss_scale_hysteresis")};
  }
  const std::int64_t data_cursor = checkpoint.int_attribute("data_cursor");
  const std::string version = checkpoint.string_attribute("format_version");
  const ChecksumKind& kind = version == "1.0.0" || version == "1.1.0" ? legacy_fnv1a64 : xxh3_64;
  const bool checksummed = version != "1.0.0";
  if (data_cursor != info.step ||
      (checksummed && checkpoint.uint_attribute(kind.attribute) != attributes_checksum(info, data_cursor, kind))) {
    throw input_error(fmt::format(
        "{}: the root attributes (step, data_cursor, layout, loss scale, deck) do not match their checksum; "
        "the file "
        "was altered, restart from another checkpoint",
        file));
  }

  // What a rank loads it verifies as it loads. Every parameter is loaded by
  // some rank; of the optimizer state, which a run may not load (weights
  // only, another optimizer), each rank verifies its round-robin share of
  // what it does not load itself: together the ranks verify every checksum
  // in the file. What is only checksummed passes through `scratch`. The
  // rehearsal reads no bytes libhdf5 would not decode.
  std::vector<unsigned char> scratch;
  std::optional<UncachedFile> uncached;
  if (copy) uncached.emplace(file, UncachedFile::Access::read);
  UncachedFile* const bytes = uncached ? &*uncached : nullptr;
  // Each read, after where its bytes start in the file (the end for data
  // libhdf5 reads itself).
  struct Read {
    Dataset dataset;
    std::function<void(const Dataset&)> run;
    std::uint64_t start = 0;
  };
  std::vector<Read> reads;
  const auto optimizer_group = checkpoint.open_group("optimizer");
  int index = 0;
  for (const auto& member : optimizer_group.names()) {
    const bool loaded = std::any_of(optimizer_state.begin(), optimizer_state.end(),
                                    [&](const auto& tensor) { return tensor.name == member; });
    if (index++ % std::max(shares, 1) != share || loaded) continue;
    reads.push_back({optimizer_group.open_dataset(member), [&](const Dataset& dataset) {
                       if (!bytes) return rehearse(file, dataset, kind, scratch);
                       verify(file, dataset, kind, checksum_of(dataset, bytes, kind, scratch));
                     }});
  }
  const auto parameter_group = checkpoint.open_group("parameters");
  for (const auto& [group, tensors, what] : {std::tuple{&parameter_group, &parameters, "parameter"},
                                             std::tuple{&optimizer_group, &optimizer_state, "optimizer state"}}) {
    for (const auto& tensor : *tensors) {
      reads.push_back({dataset_for(file, *group, tensor, what),
                       [&](const Dataset& dataset) { load(file, dataset, tensor, kind, bytes, scratch); }});
    }
  }
  // In the order the bytes lie in the file, whatever order the model names
  // them in: one sweep for the kernel's read-ahead, not a seek per tensor.
  for (auto& read : reads) {
    const auto stored = read.dataset.stored_bytes();
    read.start = stored ? stored->offset : std::numeric_limits<std::uint64_t>::max();
  }
  std::stable_sort(reads.begin(), reads.end(), [](const Read& a, const Read& b) { return a.start < b.start; });
  for (const auto& read : reads) read.run(read.dataset);
  return info;
}

void require_checkpoint_file(const std::string& file) {
  std::error_code error;
  if (!fs::is_regular_file(file, error)) {
    throw input_error(fmt::format("{}: no such checkpoint file ({})", file,
                                  fs::exists(file, error) ? "not a regular file" : "it does not exist"));
  }
}

}  // namespace

std::string checkpoint_deck(const std::string& file) {
  require_checkpoint_file(file);
  const File checkpoint = File::open(file);
  check_format(file, checkpoint);
  return checkpoint.string_attribute("deck");
}

template <class Scalar>
CheckpointInfo read_checkpoint(const std::string& file, const std::vector<ModelShape>& model,
                               const std::vector<NamedMatrix<Scalar>>& parameters,
                               const std::vector<NamedMatrix<Scalar>>& optimizer_state, int share, int shares) {
  require_checkpoint_file(file);
  // The child rehearses without the tensors, which the read here then writes.
  std::vector<std::pair<void*, std::size_t>> host_tensors;
  using Space = typename tensor::Matrix<Scalar>::memory_space;
  if (Kokkos::SpaceAccessibility<Kokkos::HostSpace, Space>::accessible) {
    for (const auto* tensors : {&parameters, &optimizer_state}) {
      for (const auto& tensor : *tensors)
        host_tensors.emplace_back(tensor.value.data(), tensor.value.span() * sizeof(Scalar));
    }
  }
  const KeptFromChildren kept(host_tensors);
  const hdf5::Rehearsal rehearsal(file,
                                  [&] { read_file(file, model, parameters, optimizer_state, share, shares, false); });
  return read_file(file, model, parameters, optimizer_state, share, shares, true);
}

template std::string write_checkpoint<float>(const SharedFileRanks&, const std::string&, const CheckpointInfo&,
                                             const std::vector<NamedMatrix<float>>&,
                                             const std::vector<NamedMatrix<float>>&, int, int, double);
template std::string write_checkpoint<double>(const SharedFileRanks&, const std::string&, const CheckpointInfo&,
                                              const std::vector<NamedMatrix<double>>&,
                                              const std::vector<NamedMatrix<double>>&, int, int, double);
template CheckpointInfo read_checkpoint<float>(const std::string&, const std::vector<ModelShape>&,
                                               const std::vector<NamedMatrix<float>>&,
                                               const std::vector<NamedMatrix<float>>&, int, int);
template CheckpointInfo read_checkpoint<double>(const std::string&, const std::vector<ModelShape>&,
                                                const std::vector<NamedMatrix<double>>&,
                                                const std::vector<NamedMatrix<double>>&, int, int);

}  // namespace kpipe::io
