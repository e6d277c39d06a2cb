// Parallel regions (core/parallel.h): an exception thrown on any share reaches the caller as
// the same exception on any thread count (before, one escaping an OpenMP region with two
// threads ended the process: exit 134); every share runs once; nested regions run inline.
#include <catch2/catch.hpp>

#include <atomic>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#include <tapegrad/core/parallel.h>

using namespace tapegrad;

TEST_CASE("parallel regions: an exception on any share reaches the caller on any thread count",
          "[parallel][parallel_errors]") {
  for (int threads : {1, 2, 3, 4}) {
    INFO("threads " << threads);
    // the last chunk of a parallel_for throws (on a helper thread when there are several)
    CHECK_THROWS_MATCHES(parallel_for(1000, 1, threads,
                                      [&](std::int64_t, std::int64_t e) {
                                        if (e == 1000) throw std::invalid_argument("bad value at 999");
                                      }),
                         std::invalid_argument, Catch::Message("bad value at 999"));
    CHECK_THROWS_AS(parallel_region(threads, [&](int t, int nt) {
                      if (t == nt - 1) throw std::bad_alloc();
                    }),
                    std::bad_alloc);
    // every share throws: one exception comes out, the others are dropped
    CHECK_THROWS_AS(parallel_shares(threads, [&](int s) { throw std::runtime_error(std::to_string(s)); }),
                    std::runtime_error);
    // dynamic items: a throwing item stops the loop, the caller gets its exception
    std::atomic<int> ran{0};
    CHECK_THROWS_WITH(parallel_items(64, threads,
                                     [&](std::int64_t k) {
                                       ++ran;
                                       if (k == 5) throw std::out_of_range("item 5");
                                     }),
                      "item 5");
    CHECK(ran.load() >= 6);
    // and the pool still works afterwards
    std::vector<int> hits(8, 0);
    parallel_shares(8, [&](int s) { ++hits[static_cast<std::size_t>(s)]; });
    CHECK(hits == std::vector<int>(8, 1));
  }
}

TEST_CASE("parallel regions: shares run once each, nested regions inline, results visible to the caller",
          "[parallel][parallel_errors]") {
  for (int threads : {1, 2, 5}) {
    std::vector<std::int64_t> out(10007, 0);
    parallel_for(10007, 1, threads, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t i = b; i < e; ++i) out[static_cast<std::size_t>(i)] += i;
    });
    std::int64_t wrong = 0;
    for (std::int64_t i = 0; i < 10007; ++i) wrong += out[static_cast<std::size_t>(i)] != i;
    CHECK(wrong == 0);
    // a region inside a share runs on that share's thread, as one share (Catch2's macros are
    // not thread-safe: the shares record, the checks come after)
    std::vector<int> inner_nt(static_cast<std::size_t>(threads), 0), in_region(static_cast<std::size_t>(threads), 0);
    std::atomic<bool> nested_caught{false};
    parallel_region(threads, [&](int t, int) {
      in_region[static_cast<std::size_t>(t)] = in_parallel_region();
      parallel_region(4, [&](int, int nt) { inner_nt[static_cast<std::size_t>(t)] = nt; });
      if (t == 0) {  // an exception inside the nested region crosses both
        try {
          parallel_for(100, 1, 4, [](std::int64_t, std::int64_t) { throw std::bad_alloc(); });
        } catch (const std::bad_alloc&) {
          nested_caught = true;
        }
      }
    });
    for (int nt : inner_nt) CHECK(nt == (threads > 1 ? 1 : 4));
    for (int r : in_region) CHECK(r == (threads > 1 ? 1 : 0));
    CHECK(nested_caught.load());
    CHECK_FALSE(in_parallel_region());
  }
}
