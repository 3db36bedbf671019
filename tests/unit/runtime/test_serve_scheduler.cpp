// The batching scheduler of kpipe serve, driven the way the executor drives
// it: microbatches formed up to a pipeline's depth, completed oldest first
// with sampled tokens fed back, every microbatch checked against the
// scheduler's contract.
#include <algorithm>
#include <deque>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <vector>

#include "catch.hpp"
#include "kpipe/runtime/serving/serve_scheduler.hpp"

using namespace kpipe;
using runtime::BatchLimits;
using runtime::BatchScheduler;
using runtime::Microbatch;
using runtime::Request;
using runtime::Segment;

namespace {

Request request(int id, int prompt, int new_tokens) {
  std::vector<int> tokens(static_cast<std::size_t>(prompt));
  std::iota(tokens.begin(), tokens.end(), 100 * id);
  return {id, 0.0, tokens, new_tokens};
}

// The token the "last stage" samples: known, so the next decode can be checked.
int sampled_token(int request, int index) { return 1000 * request + index; }

class Driver {
 public:
  explicit Driver(const BatchLimits& limits) : limits_(limits), scheduler_(limits) {}

  void arrive(const Request& r) {
    REQUIRE_FALSE(scheduler_.arrive(r));
    requests_[r.id] = r;
  }

  // Forms microbatches until `depth` are in flight or nothing can run.
  void fill(int depth) {
    while (static_cast<int>(flight_.size()) < depth) {
      auto microbatch = scheduler_.next();
      if (!microbatch) return;
      check(*microbatch);
      formed_.push_back(*microbatch);
      flight_.push_back(std::move(*microbatch));
    }
  }

  // Completes the oldest microbatch in flight with the tokens the stages would sample.
  void complete_oldest() {
    const Microbatch microbatch = flight_.front();
    flight_.pop_front();
    std::vector<int> sampled;
    for (const Segment& s : microbatch.segments) {
      busy_.erase(s.request);
      if (s.sample) sampled.push_back(sampled_token(s.request, static_cast<int>(generated_[s.request].size())));
    }
    for (const auto& event : scheduler_.complete(microbatch.id, sampled)) {
      generated_[event.request].push_back(event.token);
      CHECK(event.finished ==
            (static_cast<int>(generated_[event.request].size()) == requests_[event.request].max_new_tokens));
    }
  }

  // Runs to the end with `depth` microbatches in flight.
  void run(int depth) {
    for (int guard = 0; guard < 100000 && !(scheduler_.idle() && flight_.empty()); ++guard) {
      fill(depth);
      REQUIRE_FALSE(flight_.empty());
      complete_oldest();
    }
    REQUIRE(scheduler_.idle());
  }

  // Every request got exactly max_new_tokens tokens, and its positions were sent once each, in order.
  void check_served() const {
    for (const auto& [id, r] : requests_) {
      CAPTURE(id);
      CHECK(generated_.at(id).size() == static_cast<std::size_t>(r.max_new_tokens));
      int next = 0;
      for (const Segment& s : history_.at(id)) {
        CHECK(s.start == next);
        next += s.length;
      }
      CHECK(next == static_cast<int>(r.prompt.size()) + r.max_new_tokens - 1);
    }
    CHECK(scheduler_.free_blocks() == limits_.kv_blocks);
  }

  const std::vector<Microbatch>& formed() const { return formed_; }
  BatchScheduler& scheduler() { return scheduler_; }

 private:
  void check(const Microbatch& microbatch) {
    int tokens = 0;
    for (const Segment& s : microbatch.segments) {
      CAPTURE(microbatch.id, s.request, s.start, s.length);
      const Request& r = requests_.at(s.request);
      const int prompt = static_cast<int>(r.prompt.size());
      CHECK(busy_.insert(s.request).second);  // never in two microbatches in flight
      CHECK(s.length >= 1);
      CHECK(s.sample == (s.start + s.length >= prompt));
      const auto* token = microbatch.tokens.data() + tokens;
      if (s.start < prompt) {
        CHECK(s.start + s.length <= prompt);
        CHECK(std::equal(token, token + s.length, r.prompt.begin() + s.start));
      } else {
        CHECK(s.length == 1);
        CHECK(*token == generated_[s.request].back());
      }
      tokens += s.length;
      history_[s.request].push_back(s);
    }
    CHECK(tokens == static_cast<int>(microbatch.tokens.size()));
    if (limits_.policy == config::Batching::uniform) CHECK(tokens <= limits_.token_budget);
  }

  BatchLimits limits_;
  BatchScheduler scheduler_;
  std::map<int, Request> requests_;
  std::map<int, std::vector<int>> generated_;
  std::map<int, std::vector<Segment>> history_;
  std::deque<Microbatch> flight_;
  std::set<int> busy_;
  std::vector<Microbatch> formed_;
};

BatchLimits uniform(int budget, int sequences, int blocks = 1000, int block_tokens = 4) {
  return {config::Batching::uniform, budget, sequences, blocks, block_tokens, 256};
}

}  // namespace

TEST_CASE("uniform: every microbatch holds the token budget while that much work is ready", "[runtime][serve]") {
  // One microbatch in flight: every admitted request is ready each time.
  Driver driver(uniform(16, 8));
  std::map<int, int> remaining;  // tokens each request still has to send
  const std::vector<std::pair<int, int>> shapes = {{40, 5}, {7, 3}, {23, 9}, {1, 4}, {16, 1}};
  for (int id = 0; id < static_cast<int>(shapes.size()); ++id) {
    driver.arrive(request(id, shapes[id].first, shapes[id].second));
    remaining[id] = shapes[id].first + shapes[id].second - 1;
  }
  while (!driver.scheduler().idle()) {
    // Ready work: the rest of each prompt, or one decode.
    int ready = 0;
    for (const auto& [id, left] : remaining) {
      const int decodes = shapes[id].second - 1;
      ready += left > decodes ? left - decodes : 1;
    }
    driver.fill(1);
    const Microbatch& m = driver.formed().back();
    CHECK(static_cast<int>(m.tokens.size()) == std::min(16, ready));
    bool prefill_seen = false;  // decodes come first
    for (const Segment& s : m.segments) {
      const bool decode = s.start >= shapes[s.request].first;
      CHECK_FALSE((decode && prefill_seen));
      prefill_seen = prefill_seen || !decode;
      remaining[s.request] -= s.length;
    }
    driver.complete_oldest();
    for (auto it = remaining.begin(); it != remaining.end();) it = it->second == 0 ? remaining.erase(it) : ++it;
  }
  driver.check_served();
}

TEST_CASE("uniform: a long prompt is split into budget-sized chunks in order", "[runtime][serve]") {
  Driver driver(uniform(16, 4));
  driver.arrive(request(0, 50, 2));
  driver.run(1);
  const auto& formed = driver.formed();
  REQUIRE(formed.size() == 5);  // 16 + 16 + 16 + 2, then one decode
  CHECK(formed[0].segments[0].length == 16);
  CHECK_FALSE(formed[0].segments[0].sample);
  CHECK(formed[3].segments[0].start == 48);
  CHECK(formed[3].segments[0].sample);
  CHECK(formed[4].segments[0].start == 50);
  driver.check_served();
}

TEST_CASE("uniform and request: random traces are served completely, p microbatches in flight", "[runtime][serve]") {
  std::mt19937 rng(7);
  for (const auto policy : {config::Batching::uniform, config::Batching::request}) {
    for (const int depth : {1, 2, 4}) {
      BatchLimits limits = uniform(24, 6, 60, 8);
      limits.policy = policy;
      Driver driver(limits);
      for (int id = 0; id < 40; ++id) {
        driver.arrive(
            request(id, std::uniform_int_distribution(1, 120)(rng), std::uniform_int_distribution(1, 30)(rng)));
        if (id % 5 == 4) {  // more requests arrive while others run
          driver.fill(depth);
          driver.complete_oldest();
        }
      }
      driver.run(depth);
      driver.check_served();
    }
  }
}

TEST_CASE("request: whole prefills first, then microbatches of decodes only", "[runtime][serve]") {
  BatchLimits limits = uniform(4, 3);
  limits.policy = config::Batching::request;
  Driver driver(limits);
  for (int id = 0; id < 5; ++id) driver.arrive(request(id, 10 + id, 3));
  driver.run(1);
  const auto& formed = driver.formed();
  // Requests 0-2 prefill together (max_sequences 3), then decode; 3 and 4 are admitted as 0-2 finish.
  REQUIRE(formed[0].segments.size() == 3);
  for (const Segment& s : formed[0].segments) {
    CHECK(s.start == 0);
    CHECK(s.length == 10 + s.request);
  }
  for (const Microbatch& m : formed) {
    const bool prefill = m.segments.front().start == 0;
    for (const Segment& s : m.segments) {
      CHECK((s.start == 0) == prefill);
      if (!prefill) CHECK(s.length == 1);
    }
  }
  driver.check_served();
}

TEST_CASE("KV admission: a request waits for blocks and runs once they are released", "[runtime][serve]") {
  // 4 blocks of 4 tokens; each request needs ceil((9 + 4 - 1) / 4) = 3.
  Driver driver(uniform(16, 8, 4, 4));
  driver.arrive(request(0, 9, 4));
  driver.arrive(request(1, 9, 4));
  CHECK(driver.scheduler().blocks_needed(request(0, 9, 4)) == 3);
  driver.run(2);
  const auto& formed = driver.formed();
  const auto first_of = [&](int id) {
    return std::find_if(formed.begin(), formed.end(), [&](const Microbatch& m) {
      return std::any_of(m.segments.begin(), m.segments.end(), [&](const Segment& s) { return s.request == id; });
    });
  };
  const auto second = first_of(1);
  REQUIRE(second != formed.end());
  CHECK(second->released == std::vector<int>{0});  // freed before request 1 extends
  for (auto it = formed.begin(); it != second; ++it) CHECK(it->released.empty());
  driver.check_served();
}

TEST_CASE("KV admission: a request that can never fit is refused with the reason", "[runtime][serve]") {
  BatchScheduler scheduler(uniform(16, 8, 4, 4));
  const auto refusal = scheduler.arrive(request(3, 14, 4));  // 17 tokens: 5 blocks of 4
  REQUIRE(refusal);
  CHECK(refusal->find("request 3 refused") != std::string::npos);
  CHECK(refusal->find("need 5 KV blocks of 4 tokens, but the cache holds 4") != std::string::npos);
  const auto too_long = scheduler.arrive(request(4, 250, 7));
  REQUIRE(too_long);
  CHECK(too_long->find("context of 256") != std::string::npos);
  CHECK(scheduler.idle());
  CHECK_FALSE(scheduler.next());
}

TEST_CASE("attended positions: each position attends to itself and every earlier one", "[runtime][serve]") {
  Microbatch m;
  m.segments = {{0, 0, 3, true}, {1, 10, 1, true}, {2, 4, 2, false}};
  CHECK(runtime::attended_positions(m) == (1 + 2 + 3) + 11 + (5 + 6));
}
