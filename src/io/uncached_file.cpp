#include "kpipe/io/uncached_file.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "kpipe/core/error.hpp"

namespace kpipe::io {

namespace {

// Bytes per request: large enough to keep a virtual disk busy, small enough
// that the pages in flight stay few.
constexpr std::uint64_t piece_bytes = std::uint64_t{8} << 20;
// Direct ranges never share a page with cached ones (the kernel would write
// back and drop that page around every direct request).
constexpr std::uint64_t page_bytes = 4096;

std::uint64_t round_down(std::uint64_t value, std::uint64_t align) { return value / align * align; }
std::uint64_t round_up(std::uint64_t value, std::uint64_t align) { return round_down(value + align - 1, align); }

// The alignment O_DIRECT needs of offsets, lengths and buffers on `fd`'s
// file system, or 0 where it does not say (then kpipe does not guess).
std::uint64_t direct_alignment(int fd) {
#ifdef STATX_DIOALIGN
  struct statx about {};
  if (::statx(fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &about) != 0) return 0;
  if (!(about.stx_mask & STATX_DIOALIGN) || about.stx_dio_offset_align == 0) return 0;
  const std::uint64_t align =
      std::max<std::uint64_t>({page_bytes, about.stx_dio_offset_align, about.stx_dio_mem_align});
  return piece_bytes % align == 0 ? align : 0;
#else
  (void)fd;
  return 0;
#endif
}

[[noreturn]] void fail(const std::string& path, const char* what) {
  throw runtime_error(fmt::format("{}: cannot {}: {}", path, what, std::strerror(errno)));
}

// pwrite all `bytes`; false where the file system refuses the request (EINVAL: its alignment).
bool write_fully(int fd, const void* from, std::uint64_t bytes, std::uint64_t offset, const std::string& path) {
  std::uint64_t done = 0;
  while (done < bytes) {
    const ssize_t put =
        ::pwrite(fd, static_cast<const char*>(from) + done, bytes - done, static_cast<off_t>(offset + done));
    if (put < 0 && errno == EINTR) continue;
    if (put < 0 && errno == EINVAL && done == 0) return false;
    if (put <= 0) fail(path, "write");
    done += static_cast<std::uint64_t>(put);
  }
  return true;
}

}  // namespace

void UncachedFile::FreeAligned::operator()(std::byte* p) const { std::free(p); }

UncachedFile::UncachedFile(const std::string& path, Access access, Route route) : path_(path) {
  const int flags = (access == Access::read ? O_RDONLY : O_WRONLY) | O_CLOEXEC;
  fd_ = ::open(path.c_str(), flags);
  if (fd_ < 0) fail(path, "open");
  if (access == Access::read) {
    ::posix_fadvise(fd_, 0, 0, POSIX_FADV_SEQUENTIAL);  // a larger read-ahead window
    return;
  }
  if (route == Route::page_cache || (align_ = direct_alignment(fd_)) == 0) return;
  void* staging = nullptr;
  if (::posix_memalign(&staging, align_, piece_bytes) != 0) return;
  staging_.reset(static_cast<std::byte*>(staging));
  direct_fd_ = ::open(path.c_str(), flags | O_DIRECT);
}

UncachedFile::~UncachedFile() {
  if (direct_fd_ >= 0) ::close(direct_fd_);
  if (fd_ >= 0) ::close(fd_);
}

void UncachedFile::read(std::uint64_t offset, std::uint64_t bytes, void* into) {
  for (std::uint64_t done = 0; done < bytes;) {
    const ssize_t got = ::pread(fd_, static_cast<char*>(into) + done, bytes - done, static_cast<off_t>(offset + done));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) fail(path_, "read");
    if (got == 0) {
      throw input_error(
          fmt::format("{}: ends at byte {}, inside bytes {} to {} that were to be read; the file is "
                      "truncated, use another copy",
                      path_, offset + done, offset, offset + bytes));
    }
    done += static_cast<std::uint64_t>(got);
  }
  // Drop-behind (whole pages only: a page shared with the next range stays).
  ::posix_fadvise(fd_, static_cast<off_t>(offset), static_cast<off_t>(bytes), POSIX_FADV_DONTNEED);
}

void UncachedFile::write_cached(std::uint64_t offset, std::uint64_t bytes, const void* from) {
  for (std::uint64_t done = 0; done < bytes;) {
    const std::uint64_t size = std::min(piece_bytes, bytes - done);
    if (!write_fully(fd_, static_cast<const char*>(from) + done, size, offset + done, path_)) fail(path_, "write");
    // Write-behind: the disk takes this piece while the next is copied.
    ::sync_file_range(fd_, static_cast<off_t>(offset + done), static_cast<off_t>(size), SYNC_FILE_RANGE_WRITE);
    // Drop-behind: the previous piece is on the disk by now, or nearly; its
    // pages go back to be reused (warm) for the next.
    if (sent_bytes_ > 0) {
      ::sync_file_range(fd_, static_cast<off_t>(sent_offset_), static_cast<off_t>(sent_bytes_),
                        SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER);
      ::posix_fadvise(fd_, static_cast<off_t>(sent_offset_), static_cast<off_t>(sent_bytes_), POSIX_FADV_DONTNEED);
    }
    sent_offset_ = offset + done;
    sent_bytes_ = size;
    done += size;
  }
}

void UncachedFile::write(std::uint64_t offset, std::uint64_t bytes, const void* from) {
  const auto* const source = static_cast<const std::byte*>(from);
  const std::uint64_t end = offset + bytes;
  const std::uint64_t body = direct() ? std::min(round_up(offset, align_), end) : end;
  const std::uint64_t body_end = direct() ? std::max(body, round_down(end, align_)) : end;
  // The unaligned head and tail through the cache; the body past it, staged.
  write_cached(offset, body - offset, source);
  for (std::uint64_t piece = body; piece < body_end;) {
    const std::uint64_t size = std::min(piece_bytes, body_end - piece);
    std::memcpy(staging_.get(), source + (piece - offset), size);
    if (!write_fully(direct_fd_, staging_.get(), size, piece, path_)) {
      // The file system refused what statx promised: the rest through the cache.
      ::close(direct_fd_);
      direct_fd_ = -1;
      write_cached(piece, body_end - piece, source + (piece - offset));
      break;
    }
    piece += size;
  }
  write_cached(body_end, end - body_end, source + (body_end - offset));
}

}  // namespace kpipe::io
