// The KV cache's block table: lowest-numbered blocks first, reuse after
// release, what an extension would take, the slot of a position, and a full
// table that refuses to extend without changing.
#include "catch.hpp"
#include "kpipe/core/error.hpp"
#include "kpipe/model/kv_cache.hpp"

using kpipe::model::KvBlockTable;

TEST_CASE("a KV block table hands out the lowest free blocks and takes them back", "[model][kv_cache]") {
  KvBlockTable table(6, 4);
  CHECK(table.blocks() == 6);
  CHECK(table.block_tokens() == 4);
  CHECK(table.free_blocks() == 6);
  CHECK(table.length(7) == 0);
  CHECK(table.blocks_of(7).empty());

  CHECK(table.blocks_to_extend(7, 5) == 2);
  table.extend(7, 5);
  table.extend(0, 1);
  CHECK(table.blocks_of(7) == std::vector<int>{0, 1});
  CHECK(table.blocks_of(0) == std::vector<int>{2});
  CHECK(table.length(7) == 5);
  // Its two blocks hold 8 tokens: growing to 8 takes none, to 9 one more.
  CHECK(table.blocks_to_extend(7, 8) == 0);
  table.extend(7, 8);
  CHECK(table.free_blocks() == 3);
  table.extend(7, 9);
  CHECK(table.blocks_of(7) == std::vector<int>{0, 1, 3});
  CHECK(table.length(7) == 9);
  // Extending never shrinks.
  table.extend(7, 2);
  CHECK(table.length(7) == 9);

  // slot = block · block_tokens + position % block_tokens.
  CHECK(table.slot(7, 0) == 0);
  CHECK(table.slot(7, 5) == 5);
  CHECK(table.slot(7, 8) == 12);
  CHECK(table.slot(0, 0) == 8);
  CHECK_THROWS_AS(table.slot(7, 9), kpipe::Error);
  CHECK_THROWS_AS(table.slot(0, 1), kpipe::Error);

  table.release(0);
  table.release(42);  // unknown: nothing to do
  CHECK(table.length(0) == 0);
  CHECK(table.free_blocks() == 3);
  table.extend(3, 4);
  CHECK(table.blocks_of(3) == std::vector<int>{2});  // the released block comes back first
}

TEST_CASE("a full KV block table refuses to extend and stays as it was", "[model][kv_cache]") {
  KvBlockTable table(3, 2);
  table.extend(1, 4);
  CHECK(table.free_blocks() == 1);
  CHECK(table.blocks_to_extend(2, 3) == 2);
  CHECK_THROWS_AS(table.extend(2, 3), kpipe::Error);
  CHECK_THROWS_AS(table.extend(1, 7), kpipe::Error);
  CHECK(table.free_blocks() == 1);
  CHECK(table.length(2) == 0);
  CHECK(table.length(1) == 4);
  table.extend(2, 2);  // what fits still fits
  CHECK(table.free_blocks() == 0);
  CHECK_THROWS_AS(KvBlockTable(0, 4), kpipe::Error);
  CHECK_THROWS_AS(KvBlockTable(4, 0), kpipe::Error);
  CHECK_THROWS_AS(table.extend(-1, 1), kpipe::Error);
}
