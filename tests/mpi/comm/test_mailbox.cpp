// The mailbox of run-time-formed messages: every message arrives whole, with
// its sender, in the order that sender sent it, polled or waited for; a
// message larger than declared is refused before anything is sent.
#include <mpi.h>

#include <map>

#include "catch.hpp"
#include "kpipe/comm/collectives.hpp"
#include "kpipe/comm/mailbox.hpp"

using namespace kpipe;

TEST_CASE("mailbox messages arrive whole and in order per sender", "[comm]") {
  const int size = comm::size_of(comm::world());
  const int me = comm::rank_of(comm::world());
  const comm::Watchdog watchdog(60.0, me);
  comm::Mailbox<double> mailbox(comm::world(), watchdog, 4, 8);
  constexpr int messages = 20;
  // Every rank sends `messages` messages to every other rank, i values each.
  for (int i = 0; i < messages; ++i) {
    for (int to = 0; to < size; ++to) {
      if (to == me) continue;
      mailbox.send(to, {me, i, to}, std::vector<double>(static_cast<std::size_t>(i % 9), me + 0.5 * i));
    }
  }
  std::map<int, int> next;  // per sender, the message expected next
  for (int received = 0; received < messages * (size - 1); ++received) {
    const comm::Packet<double> packet = received % 2 ? mailbox.receive("a test message") : [&] {
      for (;;) {
        if (auto polled = mailbox.poll()) return *polled;
      }
    }();
    REQUIRE(packet.header.size() == 3);
    CHECK(packet.source == packet.header[0]);
    CHECK(packet.header[1] == next[packet.source]++);
    CHECK(packet.header[2] == me);
    CHECK(packet.values ==
          std::vector<double>(static_cast<std::size_t>(packet.header[1] % 9), packet.source + 0.5 * packet.header[1]));
  }
  for (int from = 0; from < size; ++from) CHECK(next[from] == (from == me ? 0 : messages));
  CHECK_THROWS_AS(mailbox.send((me + 1) % size, {1, 2, 3, 4}, std::vector<double>(9)), std::logic_error);
  mailbox.complete_sends("the test's sends");
  comm::barrier(comm::world());
}
