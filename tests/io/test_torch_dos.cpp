// The torch.save reader is bounded by its input: hostile files of 1-5 MB whose objects could
// outgrow their bytes (one memoized string or tuple reused a million times, a million keys
// naming one tensor) are refused or read within loose memory and time bounds, and the
// pickles torch.save writes stay well inside the unpickler's budget.
#include <catch2/catch.hpp>

#include <algorithm>
#include <ctime>
#include <cstdio>
#include <fstream>
#include <functional>
#include <string>

#include <tapegrad/io/torch_archive.h>
#include <tapegrad/io/torch_pickle.h>

#include "io/torch_test_support.h"

using namespace tapegrad;
using namespace tapegrad::io_test;
using Catch::Contains;

namespace {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif

// Peak resident memory (VmHWM) in MiB since the last reset_peak_rss().
void reset_peak_rss() { std::ofstream("/proc/self/clear_refs") << "5"; }
double peak_rss_mib() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
  return 0;
}

struct Outcome {
  std::string error;  // "no error" when parsed
  double seconds;
  double peak_mib;
};

// Parses the archive `zip`, measuring its CPU seconds and the peak RSS it reaches.
Outcome parse_bounded(const Bytes& zip) {
  reset_peak_rss();
  const std::clock_t t0 = std::clock();  // CPU time: the machine may be shared
  std::string error = "no error";
  try {
    io::parse_torch_archive(zip.data(), zip.size());
  } catch (const std::runtime_error& e) {
    error = e.what();
  }
  const double s = static_cast<double>(std::clock() - t0) / CLOCKS_PER_SEC;
  return {error.substr(0, 400), s, peak_rss_mib()};
}

// 200 MB and 2 s (20 s under a sanitizer, which also keeps freed memory: RSS unchecked).
void check_bounded(const Outcome& o) {
  INFO("error: " << o.error << "; " << o.seconds << " s, peak RSS " << o.peak_mib << " MiB");
  CHECK(o.seconds <= (kSanitized ? 20.0 : 2.0));
  if (!kSanitized) CHECK(o.peak_mib <= 200.0);
}

Pickle& short_str(Pickle& p, const std::string& s) { return p.op(0x8c).op(static_cast<std::uint8_t>(s.size())).raw(s); }
Pickle& big_str(Pickle& p, std::size_t n) { return p.str(std::string(n, 'k')); }

}  // namespace

TEST_CASE("torch.save DoS: a memoized 1 MiB key shared by thousands of dicts is not copied", "[io][errors]") {
  for (const int repeats : {4000, 600000}) {  // 1.08 MB and 4.6 MB
    INFO(repeats << " dicts");
    Pickle p;
    p.proto();
    big_str(p, 1 << 20).op('q').op(0);
    for (int i = 0; i < repeats; ++i) p.op('}').op('h').op(0).op('N').op('s').op('0');
    p.stop();
    const Outcome o = parse_bounded(torch_zip(p.b, {}));
    check_bounded(o);
    if (repeats == 4000) {
      CHECK_THAT(o.error, Contains("the pickled object is a str, not a dict of tensors"));
      const io::TorchPickle t = io::unpickle_torch(p.b.data(), p.b.size());
      CHECK(t.memory_used < 2 * p.b.size());  // one copy of the key, not 4000
    } else {
      CHECK_THAT(o.error, Contains("not a dict of tensors") || Contains("bytes of working memory"));
    }
  }
}

TEST_CASE("torch.save DoS: opcodes whose objects outgrow their bytes are refused within bounds", "[io][errors]") {
  SECTION("1.5 million empty lists: the working-memory budget") {
    Pickle p;
    p.proto();
    p.b.insert(p.b.end(), 1'500'000, ']');
    p.stop();
    const Outcome o = parse_bounded(torch_zip(p.b, {}));
    check_bounded(o);
    CHECK_THAT(o.error, Contains("bytes of working memory (64 per byte of this 1500003-byte pickle + 1 MiB"));
  }
  SECTION("one memoized 64-dimension size tuple rebuilding 300 000 tensors") {
    Pickle p;
    p.proto().global("torch._utils", "_rebuild_tensor_v2").op('q').op(0).mark();
    p.mark().str("storage").global("torch", "FloatStorage").str("0").str("cpu").integer(1).op('t').op('Q');
    p.integer(0).ints(std::vector<std::int64_t>(64, 1)).ints(std::vector<std::int64_t>(64, 1)).op(0x89);
    p.global("collections", "OrderedDict").op(')').op('R').op('t').op('q').op(1).op('0');
    for (int i = 0; i < 300000; ++i) p.op('h').op(0).op('h').op(1).op('R').op('0');
    p.stop();
    const Outcome o = parse_bounded(torch_zip(p.b, {{"0", le_bytes<float>({1})}}));
    check_bounded(o);
    CHECK_THAT(o.error, Contains("bytes of working memory"));
  }
  SECTION("200 000 state dict keys naming one memoized 64-dimension tensor: the reader's max_bytes") {
    Pickle p;
    std::vector<std::int64_t> size(64, 1);
    size[0] = 0;
    p.proto().tensor("FloatStorage", "0", 0, 0, size, std::vector<std::int64_t>(64, 1)).op('q').op(0).op('0');
    p.global("collections", "OrderedDict").op(')').op('R').mark();
    char key[16];
    for (int i = 0; i < 200000; ++i) {
      std::snprintf(key, sizeof key, "k%06d", i);
      short_str(p, key).op('h').op(0);
    }
    p.op('u').stop();
    const Outcome o = parse_bounded(torch_zip(p.b, {{"0", {}}}));
    check_bounded(o);
    CHECK_THAT(o.error, Contains("state dict entry needs") && Contains("TorchReadOptions::max_bytes"));
  }
  SECTION("a persistent id with a 1 MiB storage key loaded a million times") {
    Pickle p;
    p.proto().mark().str("storage").global("torch", "FloatStorage");
    big_str(p, 1 << 20).str("cpu").integer(1).op('t').op('q').op(0);
    for (int i = 0; i < 1000000; ++i) p.op('h').op(0).op('Q').op('0');
    p.stop();
    const Outcome o = parse_bounded(torch_zip(p.b, {}));
    check_bounded(o);
    CHECK_THAT(o.error, Contains("persistent id's key is 1048576 bytes long (at most 64)"));
  }
}

// The fixtures' pickles are small (under the 1 MiB floor); what is checked is their rate, about
// 20 bytes per pickle byte (values, items, memo, indices), a third of kTorchPickleMemoryPerByte.
TEST_CASE("torch.save pickles written by PyTorch use under half the unpickler's budget", "[io]") {
  for (const char* name : {"mlp_seq.pt", "mlp_dp.pt", "mlp_named.pt", "mlp_f16.pt", "mlp_old_bn.pt", "cnn.pt",
                           "checkpoint.pt", "views.pt"}) {
    INFO(name);
    const Bytes zip = read_bytes(fixture(name));
    // the stored data.pkl record, found through the central directory
    auto u16 = [&](std::size_t at) { return std::size_t{zip[at]} | std::size_t{zip[at + 1]} << 8; };
    auto u32 = [&](std::size_t at) { return u16(at) | u16(at + 2) << 16; };
    std::size_t eocd = zip.size() - 22;
    while (eocd > 0 && u32(eocd) != 0x06054b50) --eocd;
    const std::uint8_t* pkl = nullptr;
    std::size_t size = 0;
    for (std::size_t at = u32(eocd + 16), i = 0; i < u16(eocd + 10); ++i) {
      const std::size_t name_len = u16(at + 28);
      const std::string entry(zip.begin() + static_cast<std::ptrdiff_t>(at + 46),
                              zip.begin() + static_cast<std::ptrdiff_t>(at + 46 + name_len));
      if (entry.size() >= 8 && entry.compare(entry.size() - 8, 8, "data.pkl") == 0) {
        const std::size_t local = u32(at + 42);
        pkl = zip.data() + local + 30 + u16(local + 26) + u16(local + 28);
        size = u32(at + 20);
      }
      at += 46 + name_len + u16(at + 30) + u16(at + 32);
    }
    REQUIRE(pkl != nullptr);
    const io::TorchPickle t = io::unpickle_torch(pkl, size);
    CHECK(t.memory_used < io::kTorchPickleMemoryPerByte / 2 * size);
  }
}
