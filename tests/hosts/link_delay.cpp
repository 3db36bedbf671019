// A fixed added latency on a link, for kernels without sch_netem: packets that
// an nftables rule sends to netfilter queue QUEUE (`queue num QUEUE bypass`)
// are handed back to the kernel MILLISECONDS after they arrived, in arrival
// order, so every packet through the rule waits the same time, as under
// `tc qdisc ... netem delay`. Only the packets' metadata is copied to user
// space. Runs until SIGTERM or SIGINT, then releases what it holds and prints
// how many packets it delayed. `bypass` on the rule lets packets through
// undelayed while no program listens.
//   link_delay QUEUE MILLISECONDS
#include <arpa/inet.h>
#include <libnetfilter_queue/libnetfilter_queue.h>
#include <linux/netfilter.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <string>
#include <string_view>
#include <system_error>

namespace {

using Clock = std::chrono::steady_clock;

struct Held {
  std::uint32_t id;
  Clock::time_point due;
};

struct Queue {
  Clock::duration delay;
  std::deque<Held> held;  // in arrival order, so also in order of `due`
  long delayed = 0;
};

volatile std::sig_atomic_t stop_requested = 0;

void request_stop(int) { stop_requested = 1; }

int hold(nfq_q_handle*, nfgenmsg*, nfq_data* packet, void* data) {
  auto& queue = *static_cast<Queue*>(data);
  const nfqnl_msg_packet_hdr* header = nfq_get_msg_packet_hdr(packet);
  if (header) queue.held.push_back({ntohl(header->packet_id), Clock::now() + queue.delay});
  return 0;
}

// Hands back every held packet that is due (all of them with `all`).
void release(nfq_q_handle* handle, Queue& queue, bool all) {
  const Clock::time_point now = Clock::now();
  while (!queue.held.empty() && (all || queue.held.front().due <= now)) {
    nfq_set_verdict(handle, queue.held.front().id, NF_ACCEPT, 0, nullptr);
    queue.held.pop_front();
    ++queue.delayed;
  }
}

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "link_delay: %s: %s\n", what.c_str(), std::strerror(errno));
  std::exit(1);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: link_delay QUEUE MILLISECONDS\n");
    return 2;
  }
  int number = -1;
  double milliseconds = 0;
  const std::string_view queue_text(argv[1]), delay_text(argv[2]);
  const auto whole = [](std::string_view text, auto& value) {
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    return error == std::errc() && end == text.data() + text.size();
  };
  if (!whole(queue_text, number) || !whole(delay_text, milliseconds) || number < 0 || number > 65535 ||
      !(milliseconds > 0 && milliseconds < 10000)) {
    std::fprintf(stderr, "link_delay: give a queue number in [0, 65535] and a delay in (0, 10000) ms\n");
    return 2;
  }
  Queue queue{std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double, std::milli>(milliseconds)), {}};

  nfq_handle* library = nfq_open();
  if (!library) fail("cannot open netfilter queue (needs root and the kernel's nfnetlink_queue)");
  nfq_q_handle* handle = nfq_create_queue(library, static_cast<std::uint16_t>(number), &hold, &queue);
  if (!handle) fail("cannot bind queue " + std::to_string(number) + " (another program holds it?)");
  // Metadata only; large (GSO) packets whole, as the link would carry them;
  // room for a burst, so the kernel drops nothing while packets wait.
  if (nfq_set_mode(handle, NFQNL_COPY_META, 0) < 0) fail("cannot set the copy mode");
  nfq_set_queue_flags(handle, NFQA_CFG_F_GSO, NFQA_CFG_F_GSO);
  nfq_set_queue_maxlen(handle, 65536);
  const int fd = nfq_fd(library);
  const int buffer_bytes = 8 << 20;
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buffer_bytes, sizeof buffer_bytes);

  std::signal(SIGTERM, request_stop);
  std::signal(SIGINT, request_stop);
  std::printf("link_delay: queue %d, %g ms\n", number, milliseconds);
  std::fflush(stdout);

  alignas(std::uint64_t) char buffer[65536];
  while (!stop_requested) {
    // Sleep until the next packet is due (at most 100 ms), or one arrives.
    auto wait = std::chrono::nanoseconds(std::chrono::milliseconds(100));
    if (!queue.held.empty()) {
      wait = std::max(std::chrono::nanoseconds(0),
                      std::chrono::duration_cast<std::chrono::nanoseconds>(queue.held.front().due - Clock::now()));
    }
    const timespec timeout{static_cast<time_t>(wait.count() / 1000000000),
                           static_cast<long>(wait.count() % 1000000000)};
    pollfd readable{fd, POLLIN, 0};
    if (ppoll(&readable, 1, &timeout, nullptr) > 0) {
      const ssize_t bytes = recv(fd, buffer, sizeof buffer, MSG_DONTWAIT);
      // ENOBUFS: the socket overflowed and the kernel dropped packets, as a full link would.
      if (bytes > 0) nfq_handle_packet(library, buffer, static_cast<int>(bytes));
    }
    release(handle, queue, false);
  }
  release(handle, queue, true);
  nfq_destroy_queue(handle);
  nfq_close(library);
  std::printf("link_delay: delayed %ld packets by %g ms\n", queue.delayed, milliseconds);
  return 0;
}
