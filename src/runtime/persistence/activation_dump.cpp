#include "kpipe/runtime/persistence/activation_dump.hpp"

#include "kpipe/core/error.hpp"
#include "kpipe/core/version.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>

namespace kpipe::runtime {

std::string dump_file_name(const config::DebugConfig& debug, int world_rank) {
  return (std::filesystem::path(debug.dump_path) / fmt::format("activations-rank{}.h5", world_rank)).string();
}

namespace {

// The dump file, replacing an earlier dump of the same name but never writing
// through a link: a link planted there is refused, and the new file is created
// exclusively, so nothing else is ever truncated.
io::hdf5::File create_dump(const std::string& name) {
  const std::filesystem::file_status status = std::filesystem::symlink_status(name);
  if (std::filesystem::is_symlink(status)) {
    throw input_error(fmt::format(
        "debug.dump_path: {} is a symbolic link; kpipe never writes through a link, remove it or choose another "
        "debug.dump_path",
        name));
  }
  if (std::filesystem::is_regular_file(status)) std::filesystem::remove(name);
  return io::hdf5::File::create(name, io::hdf5::File::Exists::fail);
}

}  // namespace

ActivationDump::ActivationDump(const config::DebugConfig& debug, int world_rank, int pipeline_rank, int replica)
    : debug_(debug), file_(create_dump(dump_file_name(debug, world_rank))) {
  file_.set_attribute("format", "kpipe activation dump");
  file_.set_attribute("format_version", "1.0.0");
  file_.set_attribute("software", "kpipe");
  file_.set_attribute("software_version", version_string);
  file_.set_attribute("world_rank", world_rank);
  file_.set_attribute("pipeline_rank", pipeline_rank);
  file_.set_attribute("replica", replica);
}

bool ActivationDump::wanted(int step, int mb) const {
  const auto has = [](const std::vector<int>& list, int value) {
    return std::find(list.begin(), list.end(), value) != list.end();
  };
  return has(debug_.dump_steps, step) && (debug_.dump_microbatches.empty() || has(debug_.dump_microbatches, mb));
}

io::hdf5::Group ActivationDump::group(io::hdf5::Group& parent, const std::string& name) {
  return parent.has(name) ? parent.open_group(name) : parent.create_group(name);
}

template <class Scalar>
void ActivationDump::record(const char* what, int step, int mb, int stage, const tensor::ConstMatrix<Scalar>& tensor) {
  if (!wanted(step, mb)) return;
  auto step_group = group(file_, fmt::format("step{}", step));
  auto mb_group = group(step_group, fmt::format("mb{}", mb));
  auto stage_group = group(mb_group, fmt::format("stage{}", stage));
  const std::vector<Scalar> host = tensor::to_host<Scalar>(tensor);
  const auto rows = static_cast<std::uint64_t>(tensor.extent(0));
  // A step's head run again (train.post_validation) records its tensors again: the last run's stand.
  auto dataset = stage_group.has(what)
                     ? stage_group.open_dataset(what)
                     : stage_group.create_dataset(what, io::hdf5::type_of<Scalar>(),
                                                  {rows, static_cast<std::uint64_t>(tensor.extent(1))});
  dataset.write_rows(host.data(), 0, rows);
}

template void ActivationDump::record<float>(const char*, int, int, int, const tensor::ConstMatrix<float>&);
template void ActivationDump::record<double>(const char*, int, int, int, const tensor::ConstMatrix<double>&);

}  // namespace kpipe::runtime
