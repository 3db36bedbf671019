#pragma once
// libhdf5 (1.10 at least) trusts the structure of the files it opens: a
// damaged or hostile file can crash it (a wild read in its object-header
// code), hang it or make it allocate what the file claims. kpipe reads files
// users hand it, so before a file is opened for reading, a child process
// (core/isolated.hpp) walks every object, attribute, chunk and stored byte of
// it with libhdf5 alone. When the walk crashes or overruns its time the file
// is refused in one line and the run goes on untouched. The walk's calls are
// a superset of a reader's but not the reader's own, and libhdf5 on a
// damaged file crashes on some paths and not on others: the readers rehearse
// their own calls in the child instead, the dataset reader followed by the
// walk (Rehearsal in hdf5.hpp).

#include <cstdint>
#include <string>

namespace kpipe::io::hdf5::detail {

// Whether a dataset declaring `declared` bytes stores enough of them: all of
// them, or with a filter at least 1/1032 (zlib's deflate, the only filter
// Debian's HDF5 applies without plugins, compresses at most 1032:1). The
// reader refuses a dataset that does not (Dataset::require_stored); the walk
// leaves its data unread.
inline bool stores_declared(std::uint64_t declared, std::uint64_t stored, bool filtered) {
  constexpr std::uint64_t largest_compression = 1032;
  return stored >= declared / (filtered ? largest_compression : 1);
}

// Walks `file_name` in a child process unless this process walked the same
// file (device, inode, size and modification time) before, or a Rehearsal
// (hdf5.hpp) of it is alive; throws an input error naming the file when the
// walk crashed or did not finish in time.
void check_in_child(const std::string& file_name);

// Records `file_name` as walked: a file this process wrote and closed
// (a checkpoint it then lists among its own) needs no walk until it changes.
void trust_written(const std::string& file_name);

}  // namespace kpipe::io::hdf5::detail
