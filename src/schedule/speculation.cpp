#include "kpipe/schedule/speculation.hpp"

#include <map>
#include <tuple>

#include "kpipe/schedule/action.hpp"

namespace kpipe::schedule {

namespace {

// Forward work and its messages: nothing that reads or writes a gradient.
bool runs_ahead(ActionKind kind) {
  return kind == ActionKind::forward || kind == ActionKind::loss || kind == ActionKind::send_act ||
         kind == ActionKind::recv_act;
}

}  // namespace

std::vector<SpeculativeHead> speculative_heads(const Schedule& schedule) {
  const int p = static_cast<int>(schedule.ranks.size());
  // Where each message is sent: (sender, receiver, tag) -> index in the sender's list.
  std::map<std::tuple<int, int, int>, std::size_t> sent_at;
  for (int r = 0; r < p; ++r) {
    const auto& actions = schedule.ranks[r];
    for (std::size_t i = 0; i < actions.size(); ++i) {
      if (is_send(actions[i].kind)) sent_at[{r, actions[i].peer, actions[i].tag}] = i;
    }
  }
  const auto send_of = [&](int receiver, const Action& receive) {
    return sent_at.at({receive.peer, receiver, receive.tag});
  };
  std::vector<SpeculativeHead> heads(static_cast<std::size_t>(p));
  for (int r = 0; r < p; ++r) {
    const auto& actions = schedule.ranks[r];
    while (heads[r].end < actions.size() && runs_ahead(actions[heads[r].end].kind)) ++heads[r].end;
  }
  // Cut a head at its first receive whose send lies past the sender's head;
  // a cut may cut others, so repeat until none moves (ends only shrink).
  for (bool cut = true; cut;) {
    cut = false;
    for (int r = 0; r < p; ++r) {
      const auto& actions = schedule.ranks[r];
      for (std::size_t i = 0; i < heads[r].end; ++i) {
        if (is_receive(actions[i].kind) && send_of(r, actions[i]) >= heads[actions[i].peer].end) {
          heads[r].end = i;
          cut = true;
          break;
        }
      }
    }
  }
  for (int r = 0; r < p; ++r) {
    const auto& actions = schedule.ranks[r];
    for (std::size_t i = heads[r].end; i < actions.size(); ++i) {
      if (is_receive(actions[i].kind) && send_of(r, actions[i]) < heads[actions[i].peer].end) {
        heads[r].drained.push_back(i);
      }
    }
  }
  return heads;
}

}  // namespace kpipe::schedule
