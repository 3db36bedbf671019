#pragma once
// Large byte ranges of a file read and written once, without filling the
// page cache with them.
//
// A checkpoint is hundreds of megabytes written once and read once. Through
// the page cache every byte lands in a freshly allocated cache page; on a
// virtual machine that hands its free pages back to the host (virtio-balloon
// free page reporting) each fresh page is also a fault on the host, and a
// buffered write of a checkpoint took several times as long as one past the
// cache (docs/performance.md, "AMD EPYC, Zen 4 (AVX-512, AVX512-BF16;
// 2026-12-04)", Checkpoints). So an UncachedFile
//  * writes the aligned body of each range past the cache (O_DIRECT, from
//    one staging buffer it reuses) where the file system says how it aligns
//    direct I/O (statx STATX_DIOALIGN), and everything else through the
//    cache with write-behind and drop-behind: each piece is sent to the
//    disk at once, and its pages leave the cache when the next one is sent;
//  * reads through the cache (the kernel's read-ahead keeps more requests
//    in flight than one reader's direct reads) and drops what it has read,
//    so read-ahead refills the same few warm pages.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace kpipe::io {

class UncachedFile {
 public:
  enum class Access { read, write };
  // How writes go: automatic (O_DIRECT where the file system allows it) or
  // always through the page cache.
  enum class Route { automatic, page_cache };

  // Opens an existing file; throws a one-line error naming it when it cannot.
  UncachedFile(const std::string& path, Access access, Route route = Route::automatic);
  ~UncachedFile();
  UncachedFile(const UncachedFile&) = delete;
  UncachedFile& operator=(const UncachedFile&) = delete;

  // Bytes [offset, offset + bytes) into `into`; throws a one-line error when
  // the file ends first (a truncated file).
  void read(std::uint64_t offset, std::uint64_t bytes, void* into);
  // `bytes` bytes from `from` at `offset`, extending the file as needed.
  // Durable only after the caller's fsync, as with write(2).
  void write(std::uint64_t offset, std::uint64_t bytes, const void* from);

  // Whether writes' aligned bodies bypass the page cache.
  bool direct() const { return direct_fd_ >= 0; }

 private:
  void write_cached(std::uint64_t offset, std::uint64_t bytes, const void* from);

  struct FreeAligned {
    void operator()(std::byte* p) const;
  };
  std::string path_;
  int fd_ = -1;         // through the page cache
  int direct_fd_ = -1;  // O_DIRECT, or -1
  std::uint64_t align_ = 1;
  std::unique_ptr<std::byte, FreeAligned> staging_;
  // The last piece written through the cache, still on its way to the disk.
  std::uint64_t sent_offset_ = 0, sent_bytes_ = 0;
};

}  // namespace kpipe::io
