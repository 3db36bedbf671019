#include "kpipe/runtime/persistence/activation_store.hpp"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <utility>

#include "kpipe/core/error.hpp"
#include "kpipe/io/hdf5.hpp"

namespace kpipe::runtime {

std::string activation_directory(const std::string& configured) {
  if (!configured.empty()) return configured;
  const char* tmpdir = std::getenv("TMPDIR");
  return tmpdir != nullptr && *tmpdir != '\0' ? tmpdir : "/tmp";
}

void require_activation_directory(const std::string& directory) {
  struct stat info {};
  const char* why = nullptr;
  if (::stat(directory.c_str(), &info) != 0) {
    why = std::strerror(errno);
  } else if (!S_ISDIR(info.st_mode)) {
    why = "not a directory";
  } else if (::access(directory.c_str(), W_OK | X_OK) != 0) {
    why = std::strerror(errno);
  }
  if (why != nullptr) {
    throw input_error(
        fmt::format("cannot write activation files into pipeline.activation_path = \"{}\": {}; name an "
                    "existing writable directory (node-local scratch), or leave it empty for $TMPDIR "
                    "or /tmp",
                    directory, why));
  }
}

namespace {

using Clock = std::chrono::steady_clock;
using Bytes = Kokkos::View<unsigned char*, tensor::MemorySpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
using HostBytes = Kokkos::View<unsigned char*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
constexpr bool host_reachable = Kokkos::SpaceAccessibility<Kokkos::HostSpace, tensor::MemorySpace>::accessible;

double since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

io::hdf5::Type file_type(const tensor::TensorSpec& spec, const std::string& name) {
  switch (spec.dtype()) {
    case tensor::DType::float32:
      return io::hdf5::Type::float32;
    case tensor::DType::float64:
      return io::hdf5::Type::float64;
    case tensor::DType::bfloat16:
      return io::hdf5::Type::bfloat16;
    case tensor::DType::float16:
      return io::hdf5::Type::float16;
  }
  throw runtime_error(fmt::format("the activation store cannot keep {} (\"{}\")", spec.to_string(), name));
}

// f(T{}) for the element type T of `type`, one that file_type returns.
template <class F>
void with_element_type(io::hdf5::Type type, F&& f) {
  switch (type) {
    case io::hdf5::Type::float64:
      return f(double{});
    case io::hdf5::Type::bfloat16:
      return f(tensor::BFloat16{});
    case io::hdf5::Type::float16:
      return f(tensor::Half{});
    default:
      return f(float{});
  }
}

// {rows, elements per row}: every stashed tensor is stored as a 2-D dataset.
std::vector<std::uint64_t> file_shape(const tensor::TensorSpec& spec) {
  const auto elements = static_cast<std::uint64_t>(spec.elements());
  const auto rows = spec.rank() == 0 ? 1 : static_cast<std::uint64_t>(spec.extent(0));
  return {rows, rows == 0 ? 0 : elements / rows};
}

}  // namespace

// A directory of this process's own under `parent`, mode 0700 and named at
// random (mkdtemp): nobody can have planted a file or a link at its path, nor
// read what it holds.
std::string private_directory(const std::string& parent, int world_rank) {
  std::string pattern =
      (std::filesystem::path(parent) / fmt::format("kpipe-activations-rank{}-XXXXXX", world_rank)).string();
  if (::mkdtemp(pattern.data()) == nullptr) {
    throw runtime_error(fmt::format("cannot create a private directory for the activation store in \"{}\": {}", parent,
                                    std::strerror(errno)));
  }
  return pattern;
}

struct Hdf5ActivationStore::State {
  State(std::string dir, std::string name, tensor::ExecContext& context)
      : directory(std::move(dir)),
        file_name(std::move(name)),
        file(io::hdf5::File::create(file_name, io::hdf5::File::Exists::fail)),
        exec(context) {}

  std::string directory;  // private_directory's, removed with the file
  std::string file_name;
  io::hdf5::File file;
  tensor::ExecContext& exec;
  ActivationTraffic traffic;
  std::vector<unsigned char> staging;  // host copy of one tensor where the device memory is not host-reachable
};

class Hdf5ActivationStore::Chunk final : public model::StashStore {
 public:
  Chunk(State& state, int chunk) : state_(state), group_(state.file.create_group(fmt::format("chunk{}", chunk))) {}

  void put(int mb, const std::string& name, const tensor::Tensor& tensor) override {
    const auto start = Clock::now();
    const auto type = file_type(tensor.spec(), name);
    const auto shape = file_shape(tensor.spec());
    io::hdf5::Dataset& dataset = dataset_for(mb, name, type, shape);
    const void* data = host_bytes(tensor);
    with_element_type(
        type, [&](auto element) { dataset.write_rows(static_cast<const decltype(element)*>(data), 0, shape[0]); });
    held_.insert({mb, name});
    state_.traffic.bytes_written += tensor.spec().bytes();
    state_.traffic.tensors_written += 1;
    state_.traffic.write_seconds += since(start);
  }

  void take(int mb, const std::string& name, const tensor::Tensor& into) override {
    const auto start = Clock::now();
    const auto held = held_.find({mb, name});
    const auto found = datasets_.find(key(mb, name));
    if (held == held_.end() || found == datasets_.end()) {
      throw runtime_error(fmt::format("{}: {}: microbatch {} has no stashed tensor \"{}\" to take back",
                                      state_.file_name, group_.path(), mb, name));
    }
    io::hdf5::Dataset& dataset = found->second;
    const auto shape = file_shape(into.spec());
    if (dataset.shape() != shape || dataset.type() != file_type(into.spec(), name)) {
      throw runtime_error(fmt::format("{}: {}: the stashed \"{}\" of microbatch {} does not fit {}", state_.file_name,
                                      dataset.path(), name, mb, into.spec().to_string()));
    }
    const std::size_t bytes = into.spec().bytes();
    void* target = host_reachable ? into.data() : staging(bytes);
    // The pooled buffer may still be read by kernels queued before it was handed out.
    if (host_reachable) state_.exec.fence("kpipe::runtime::activation_store::take");
    with_element_type(dataset.type(),
                      [&](auto element) { dataset.read_rows(static_cast<decltype(element)*>(target), 0, shape[0]); });
    if (!host_reachable) {
      Kokkos::deep_copy(state_.exec.space(), Bytes(static_cast<unsigned char*>(into.data()), bytes),
                        HostBytes(static_cast<unsigned char*>(target), bytes));
      state_.exec.fence("kpipe::runtime::activation_store::take");  // the staging buffer is reused by the next call
    }
    held_.erase(held);
    state_.traffic.bytes_read += bytes;
    state_.traffic.tensors_read += 1;
    state_.traffic.read_seconds += since(start);
  }

 private:
  static std::string key(int mb, const std::string& name) { return fmt::format("mb{}/{}", mb, name); }

  // The bytes of `tensor` readable on the host, once the kernels writing it are done.
  const void* host_bytes(const tensor::Tensor& tensor) {
    const std::size_t bytes = tensor.spec().bytes();
    if (host_reachable) {
      state_.exec.fence("kpipe::runtime::activation_store::put");
      return tensor.data();
    }
    void* host = staging(bytes);
    Kokkos::deep_copy(state_.exec.space(), HostBytes(static_cast<unsigned char*>(host), bytes),
                      Bytes(static_cast<unsigned char*>(tensor.data()), bytes));
    state_.exec.fence("kpipe::runtime::activation_store::put");
    return host;
  }

  void* staging(std::size_t bytes) {
    if (state_.staging.size() < bytes) state_.staging.resize(bytes);
    return state_.staging.data();
  }

  // The dataset of (mb, name), created at its first put and reused by every
  // later step's put of the same microbatch id.
  io::hdf5::Dataset& dataset_for(int mb, const std::string& name, io::hdf5::Type type,
                                 const std::vector<std::uint64_t>& shape) {
    const std::string path = key(mb, name);
    auto found = datasets_.find(path);
    if (found != datasets_.end() && (found->second.shape() != shape || found->second.type() != type)) {
      throw runtime_error(
          fmt::format("{}: {}: microbatch {} stashes \"{}\" with a shape other than in an earlier "
                      "step",
                      state_.file_name, found->second.path(), mb, name));
    }
    if (found == datasets_.end()) {
      const std::string group_name = fmt::format("mb{}", mb);
      auto group = groups_.find(mb);
      if (group == groups_.end()) group = groups_.emplace(mb, group_.create_group(group_name)).first;
      found = datasets_.emplace(path, group->second.create_dataset(name, type, shape)).first;
    }
    return found->second;
  }

  State& state_;
  io::hdf5::Group group_;
  std::map<int, io::hdf5::Group> groups_;
  std::map<std::string, io::hdf5::Dataset> datasets_;
  std::set<std::pair<int, std::string>> held_;  // put and not yet taken
};

Hdf5ActivationStore::Hdf5ActivationStore(const std::string& directory, int world_rank, int chunks,
                                         tensor::ExecContext& exec) {
  require_activation_directory(directory);
  const std::string own = private_directory(directory, world_rank);
  try {
    state_ = std::make_unique<State>(own, (std::filesystem::path(own) / "activations.h5").string(), exec);
  } catch (...) {
    std::error_code ignored;
    std::filesystem::remove_all(own, ignored);
    throw;
  }
  state_->file.set_attribute("format", "kpipe activation store");
  state_->file.set_attribute("rank", world_rank);
  for (int c = 0; c < chunks; ++c) chunks_.push_back(std::make_unique<Chunk>(*state_, c));
}

Hdf5ActivationStore::~Hdf5ActivationStore() {
  const std::string name = state_->file_name, directory = state_->directory;
  chunks_.clear();  // close every dataset and group before the file
  state_.reset();
  std::error_code ignored;
  std::filesystem::remove(name, ignored);
  std::filesystem::remove(directory, ignored);  // only when empty: nothing but ours is removed
}

model::StashStore& Hdf5ActivationStore::chunk(int c) { return *chunks_.at(static_cast<std::size_t>(c)); }
const std::string& Hdf5ActivationStore::file_name() const { return state_->file_name; }
const ActivationTraffic& Hdf5ActivationStore::traffic() const { return state_->traffic; }

std::uint64_t Hdf5ActivationStore::file_bytes() const {
  std::error_code error;
  const auto bytes = std::filesystem::file_size(state_->file_name, error);
  return error ? 0 : static_cast<std::uint64_t>(bytes);
}

}  // namespace kpipe::runtime
