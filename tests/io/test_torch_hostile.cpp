// Crafted hostile torch.save archives and pickles are refused with an error naming the
// problem: never executed, never a crash, a hang or an allocation beyond the file's size.
// Each SECTION is one refusal counted in docs/errors.md ("io: torch.save files").
#include <catch2/catch.hpp>

#include <tapegrad/io/torch_archive.h>
#include <tapegrad/io/torch_load.h>
#include <tapegrad/io/torch_pickle.h>
#include <tapegrad/io/torch_tensors.h>

#include "io/torch_test_support.h"

using namespace tapegrad;
using namespace tapegrad::io_test;
using Catch::Contains;

namespace {

std::string pickle_error(const Bytes& b) {
  try {
    io::unpickle_torch(b.data(), b.size());
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "no error";
}
std::string pickle_error(const Pickle& p) { return pickle_error(p.b); }

std::string archive_error(const Bytes& zip, const io::TorchReadOptions& o = {}) {
  try {
    io::parse_torch_archive(zip.data(), zip.size(), o);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "no error";
}

// A one-tensor state dict {"w": <tensor>} with the given view, as an archive.
Bytes one_tensor(const std::string& type, std::int64_t numel, std::int64_t offset, std::vector<std::int64_t> size,
                 std::vector<std::int64_t> stride, const Bytes& record, const std::string& key = "0") {
  Pickle p;
  p.begin_dict().str("w").tensor(type, key, numel, offset, size, stride).end_dict();
  return torch_zip(p.b, {{key, record}});
}

}  // namespace

TEST_CASE("torch.save hostile pickles: refused opcodes and globals, never executed", "[io][errors]") {
  SECTION("a global outside the allow-list (os.system)") {
    Pickle p;
    p.proto().global("os", "system").str("touch /tmp/pwned").op(0x85).op('R').stop();
    CHECK_THAT(pickle_error(p), Contains("refusing global 'os.system'") && Contains("at byte 2"));
  }
  SECTION("STACK_GLOBAL naming builtins.eval") {
    Pickle p;
    p.proto(4).op(0x8c).op(8).raw("builtins").op(0x8c).op(4).raw("eval").op(0x93).stop();
    CHECK_THAT(pickle_error(p), Contains("refusing global 'builtins.eval'"));
  }
  SECTION("object-building opcodes (INST, NEWOBJ) and bytes") {
    CHECK_THAT(pickle_error(Bytes{0x80, 2, 'i'}), Contains("unsupported pickle opcode 0x69 (INST)"));
    CHECK_THAT(pickle_error(Bytes{0x80, 2, ')', ')', 0x81}), Contains("0x81 (NEWOBJ)"));
    CHECK_THAT(pickle_error(Bytes{0x80, 2, 'C', 1, 'x', '.'}), Contains("SHORT_BINBYTES"));
    CHECK_THAT(pickle_error(Bytes{0xff}), Contains("unsupported pickle opcode 0xff"));
  }
  SECTION("calling a storage class or REDUCE on a non-callable") {
    Pickle p;
    p.proto().global("torch", "FloatStorage").op(')').op('R').stop();
    CHECK_THAT(pickle_error(p), Contains("not callable here"));
    CHECK_THAT(pickle_error(Bytes{0x80, 2, 'N', ')', 'R', '.'}), Contains("REDUCE calls a None"));
  }
  SECTION("OrderedDict called with arguments") {
    Pickle p;
    p.proto().global("collections", "OrderedDict").op(']').op(0x85).op('R').stop();
    CHECK_THAT(pickle_error(p), Contains("OrderedDict called with 1 arguments"));
  }
  SECTION("an unknown protocol") { CHECK_THAT(pickle_error(Bytes{0x80, 6, 'N', '.'}), Contains("pickle protocol 6")); }
}

TEST_CASE("torch.save hostile pickles: truncation, huge lengths, stack and memo abuse", "[io][errors]") {
  SECTION("a string length past the end (no allocation of 4 GiB)") {
    CHECK_THAT(pickle_error(Bytes{0x80, 2, 'X', 0xff, 0xff, 0xff, 0xff, 'a'}),
               Contains("declares 4294967295 bytes, 1 remain"));
    CHECK_THAT(pickle_error(Bytes{0x80, 2, 0x8d, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}),
               Contains("declares 9223372036854775807 bytes"));
  }
  SECTION("truncated arguments and a missing STOP") {
    CHECK_THAT(pickle_error(Bytes{0x80, 2, 'J', 1}), Contains("truncated BININT argument"));
    CHECK_THAT(pickle_error(Bytes{0x80, 2, 'N'}), Contains("without a STOP"));
    CHECK_THAT(pickle_error(Bytes{0x80, 2, 'c', 'o', 's'}), Contains("not terminated by a newline"));
    CHECK_THAT(pickle_error(Bytes{}), Contains("without a STOP"));
  }
  SECTION("bytes after STOP, or more than one value left") {
    CHECK_THAT(pickle_error(Bytes{0x80, 2, 'N', '.', 'N'}), Contains("1 bytes after STOP"));
    CHECK_THAT(pickle_error(Bytes{0x80, 2, 'N', 'N', '.'}), Contains("STOP with 2 values"));
  }
  SECTION("stack underflow and a missing MARK") {
    CHECK_THAT(pickle_error(Bytes{0x80, 2, 'R'}), Contains("REDUCE on an empty stack"));
    CHECK_THAT(pickle_error(Bytes{0x80, 2, 'N', '(', 's'}), Contains("SETITEM on an empty stack (above the last MARK)"));
    CHECK_THAT(pickle_error(Bytes{0x80, 2, 't'}), Contains("TUPLE without a MARK"));
  }
  SECTION("a memo index never stored") {
    CHECK_THAT(pickle_error(Bytes{0x80, 2, 'h', 7, '.'}), Contains("memo index 7 read before it was stored"));
    CHECK_THAT(pickle_error(Bytes{0x80, 2, 'j', 0xff, 0xff, 0xff, 0xff, '.'}), Contains("memo index 4294967295"));
  }
  SECTION("integers wider than 64 bits, unhashable dict keys") {
    CHECK_THAT(pickle_error(Bytes{0x80, 2, 0x8a, 9, 1, 2, 3, 4, 5, 6, 7, 8, 9, '.'}), Contains("integer of 9 bytes"));
    CHECK_THAT(pickle_error(Bytes{0x80, 2, '}', ')', 'N', 's', '.'}), Contains("dict key of type tuple"));
  }
  SECTION("a list and a dict that contain themselves: no leak, no endless walk") {
    Bytes self_list{0x80, 2, ']', 'q', 0, 'h', 0, 'a', '.'};
    const io::TorchPickle p = io::unpickle_torch(self_list.data(), self_list.size());
    CHECK(p.value(p.root).items == std::vector<std::size_t>{p.root});
    std::uint64_t budget = 1 << 20;
    auto no_read = [](const io::PickleStorage&, std::size_t) -> std::shared_ptr<Storage> { return nullptr; };
    CHECK_THROWS_WITH(io::torch_state_dict(p, no_read, {}, budget), Contains("is a list, not a dict"));
    Pickle d;
    d.proto().op('}').op('q').op(0).str("a").op('h').op(0).op('s').stop();
    const io::TorchPickle q = io::unpickle_torch(d.b.data(), d.b.size());
    CHECK_THROWS_WITH(io::torch_state_dict(q, no_read, {}, budget), Contains("key 'a' holds a dict, not a tensor"));
  }
  SECTION("deep nesting (200 000 levels) is a flat loop, not recursion") {
    Bytes b{0x80, 2};
    for (int i = 0; i < 200000; ++i) b.push_back(']');
    for (int i = 0; i < 199999; ++i) b.push_back('a');
    b.push_back('.');
    const io::TorchPickle p = io::unpickle_torch(b.data(), b.size());
    CHECK(p.values.size() == 200000);
    Bytes marks{0x80, 2};
    for (int i = 0; i < 200000; ++i) marks.push_back('(');
    marks.push_back('.');
    CHECK_THAT(pickle_error(marks), Contains("200000 open MARKs"));
  }
}

TEST_CASE("torch.save hostile pickles: bad tensor rebuild arguments", "[io][errors]") {
  auto rebuild = [](const std::function<void(Pickle&)>& args) {
    Pickle p;
    p.begin_dict().str("w").global("torch._utils", "_rebuild_tensor_v2").mark();
    args(p);
    p.op('t').op('R').end_dict();
    return p;
  };
  auto storage = [](Pickle& p) {
    p.mark().str("storage").global("torch", "FloatStorage").str("0").str("cpu").integer(4).op('t').op('Q');
  };
  auto hooks = [](Pickle& p) { p.op(0x89).global("collections", "OrderedDict").op(')').op('R'); };
  SECTION("negative size, negative offset, rank mismatch, 65 dimensions, wrong argument count") {
    CHECK_THAT(pickle_error(rebuild([&](Pickle& p) { storage(p); p.integer(0).ints({-2}).ints({1}); hooks(p); })),
               Contains("size holds the negative value -2"));
    CHECK_THAT(pickle_error(rebuild([&](Pickle& p) { storage(p); p.integer(-1).ints({2}).ints({1}); hooks(p); })),
               Contains("storage offset is negative"));
    CHECK_THAT(pickle_error(rebuild([&](Pickle& p) { storage(p); p.integer(0).ints({2, 2}).ints({1}); hooks(p); })),
               Contains("size has 2 dimensions and its stride 1"));
    CHECK_THAT(pickle_error(rebuild([&](Pickle& p) {
                 storage(p);
                 p.integer(0).ints(std::vector<std::int64_t>(65, 1)).ints(std::vector<std::int64_t>(65, 1));
                 hooks(p);
               })),
               Contains("65 dimensions"));
    CHECK_THAT(pickle_error(rebuild([&](Pickle& p) { storage(p); })), Contains("called with 1 arguments"));
  }
  SECTION("a persistent id that is not a storage tuple, one key with two types") {
    CHECK_THAT(pickle_error(Bytes{0x80, 2, 'N', 'Q', '.'}), Contains("persistent id is not a 5-tuple"));
    Pickle p;
    p.begin_dict()
        .str("a").tensor("FloatStorage", "0", 4, 0, {4}, {1})
        .str("b").tensor("DoubleStorage", "0", 4, 0, {4}, {1})
        .end_dict();
    CHECK_THAT(pickle_error(p), Contains("storage '0' appears as FloatStorage of 4 elements and as DoubleStorage"));
  }
}

TEST_CASE("torch.save hostile archives: not zip, truncated, damaged, unsafe names", "[io][errors]") {
  const Bytes good = read_bytes(fixture("mlp_seq.pt"));
  REQUIRE(io::parse_torch_archive(good.data(), good.size()).size() == 9);
  SECTION("not a zip archive (a pickle, a legacy pre-1.6 file)") {
    CHECK_THAT(archive_error(Bytes{0x80, 2, 'N', '.'}), Contains("not a zip archive"));
  }
  SECTION("truncated archives: every cut is refused") {
    for (std::size_t cut : {std::size_t{4}, std::size_t{100}, good.size() / 2, good.size() - 30, good.size() - 1}) {
      INFO("cut at " << cut);
      const Bytes part(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(cut));
      CHECK_THAT(archive_error(part), Contains("torch.save file: not a readable zip archive: Not a zip archive"));
    }
  }
  SECTION("a damaged record (CRC mismatch)") {
    Bytes bad = good;
    const std::string marker = "mlp_seq/data/0";
    auto it = std::search(bad.begin(), bad.end(), marker.begin(), marker.end());
    REQUIRE(it != bad.end());
    *(it + static_cast<std::ptrdiff_t>(marker.size()) + 70) ^= 0x40;  // inside the first storage (after padding)
    CHECK_THAT(archive_error(bad), Contains("record 'mlp_seq/data/0' is damaged: CRC error"));
  }
  SECTION("path traversal, absolute and backslash names") {
    Pickle p;
    p.begin_dict().end_dict();
    CHECK_THAT(archive_error(make_zip({{"../archive/data.pkl", p.b}})), Contains("climbs out of the archive"));
    CHECK_THAT(archive_error(make_zip({{"archive/data.pkl", p.b}, {"archive/../../etc/x", {}}})),
               Contains("climbs out"));
    CHECK_THAT(archive_error(make_zip({{"/archive/data.pkl", p.b}})), Contains("absolute path"));
    CHECK_THAT(archive_error(make_zip({{"archive\\data.pkl", p.b}})), Contains("backslash"));
  }
  SECTION("two top-level folders, duplicate names, no data.pkl") {
    Pickle p;
    p.begin_dict().end_dict();
    CHECK_THAT(archive_error(make_zip({{"a/data.pkl", p.b}, {"b/data/0", {}}})), Contains("different top-level folders"));
    CHECK_THAT(archive_error(make_zip({{"a/data.pkl", p.b}, {"a/data.pkl", p.b}})),
               Contains("not a readable zip archive: two entries share a name"));
    CHECK_THAT(archive_error(make_zip({{"a/constants.pkl", p.b}})), Contains("no a/data.pkl"));
  }
  SECTION("a storage key that is a path") {
    Pickle p;
    p.begin_dict().str("w").tensor("FloatStorage", "../../x", 1, 0, {1}, {1}).end_dict();
    const Bytes z = torch_zip(p.b, {{"0", le_bytes<float>({1})}});
    CHECK_THAT(archive_error(z), Contains("storage key '../../x' is not a plain record name"));
  }
}

TEST_CASE("torch.save hostile archives: sizes that lie, zip bombs, views past their storage", "[io][errors]") {
  SECTION("a record whose size differs from its storage's") {
    CHECK_THAT(archive_error(one_tensor("FloatStorage", 4, 0, {4}, {1}, le_bytes<float>({1, 2, 3}))),
               Contains("holds 12 bytes; its storage declares 16"));
  }
  SECTION("a view reaching past its storage, an element count that overflows") {
    CHECK_THAT(archive_error(one_tensor("FloatStorage", 4, 3, {2}, {1}, le_bytes<float>({1, 2, 3, 4}))),
               Contains("reaches element 4 of storage '0', which holds 4"));
    CHECK_THAT(archive_error(one_tensor("FloatStorage", 4, 0, {2, 2}, {4, 1}, le_bytes<float>({1, 2, 3, 4}))),
               Contains("reaches element 5"));
    CHECK_THAT(archive_error(one_tensor("FloatStorage", 4, 0, {std::int64_t{1} << 40, std::int64_t{1} << 40}, {0, 0},
                                        le_bytes<float>({1, 2, 3, 4}))),
               Contains("tensor 'w''s element count overflows 64 bits"));
    CHECK_THAT(archive_error(one_tensor("FloatStorage", 4, 0, {3}, {std::int64_t{1} << 62}, le_bytes<float>({1, 2, 3, 4}))),
               Contains("reaches element 9223372036854775808"));
    CHECK_THAT(archive_error(one_tensor("FloatStorage", 4, 0, {5}, {std::int64_t{1} << 62}, le_bytes<float>({1, 2, 3, 4}))),
               Contains("tensor 'w''s extent overflows 64 bits"));
  }
  SECTION("a zip bomb: a deflated record inflating beyond its declared size") {
    Pickle p;
    p.begin_dict().str("w").tensor("FloatStorage", "0", 4, 0, {4}, {1}).end_dict();
    std::vector<ZipEntry> e{{"archive/data.pkl", p.b}};
    ZipEntry bomb{"archive/data/0", Bytes(16 << 20, 0), true, 16};  // 16 MiB of zeros declared as 16 bytes
    e.push_back(bomb);
    const Bytes z = make_zip(e);
    CHECK(z.size() < 64 * 1024);
    CHECK_THAT(archive_error(z), Contains("record 'archive/data/0' inflates beyond its declared 16 bytes"));
  }
  SECTION("a declared size far beyond the archive (no allocation)") {
    Pickle p;
    p.begin_dict().str("w").tensor("FloatStorage", "0", 1 << 28, 0, {4}, {1}).end_dict();
    ZipEntry big{"archive/data/0", Bytes(1 << 20, 0), true, 1u << 30};  // claims 1 GiB
    const Bytes z = make_zip({{"archive/data.pkl", p.b}, big});
    CHECK_THAT(archive_error(z), Contains("record 'archive/data/0' declares 1073741824 bytes, beyond the reader's allocation limit"));
    io::TorchReadOptions o;
    o.max_bytes = 300;  // the 163-byte pickle fits, the 256-byte storage does not
    const Bytes ok = one_tensor("FloatStorage", 64, 0, {64}, {1}, le_bytes<float>(std::vector<float>(64, 1.f)));
    CHECK_THAT(archive_error(ok, o), Contains("record 'archive/data/0' declares 256 bytes, beyond the reader's allocation limit"));
  }
  SECTION("compression methods other than stored and deflate, encrypted records") {
    Pickle p;
    p.begin_dict().end_dict();
    ZipEntry bz{"archive/data.pkl", p.b};
    bz.method_override = 12;  // bzip2
    CHECK_THAT(archive_error(make_zip({bz})), Contains("record 'archive/data.pkl' uses compression method 12"));
  }
  SECTION("unsupported dtypes are refused naming the tensor") {
    CHECK_THAT(archive_error(one_tensor("IntStorage", 2, 0, {2}, {1}, le_bytes<std::int32_t>({1, 2}))),
               Contains("tensor 'w' is int32 (torch.IntStorage)"));
    CHECK_THAT(archive_error(one_tensor("BoolStorage", 2, 0, {2}, {1}, Bytes{1, 0})), Contains("tensor 'w' is bool"));
  }
  SECTION("a byteorder that is neither little nor big") {
    Pickle p;
    p.begin_dict().end_dict();
    CHECK_THAT(archive_error(torch_zip(p.b, {}, "archive/", "middle")), Contains("byteorder record says 'middle'"));
  }
}

TEST_CASE("torch.save crafted archives that are valid: big-endian, deflated, protocol 4, empty", "[io]") {
  SECTION("byteorder big: elements are swapped") {
    Pickle p;
    p.begin_dict().str("w").tensor("FloatStorage", "0", 2, 0, {2}, {1}).str("n").tensor("LongStorage", "1", 1, 0, {}, {}).end_dict();
    // big-endian bytes: 1.5f = 0x3fc00000, -2.0f = 0xc0000000, 258 = 0x102
    const Bytes f{0x3f, 0xc0, 0, 0, 0xc0, 0, 0, 0}, n{0, 0, 0, 0, 0, 0, 1, 2};
    const Bytes z = torch_zip(p.b, {{"0", f}, {"1", n}}, "big/", "big");
    const layers::StateDict d = io::parse_torch_archive(z.data(), z.size());
    CHECK(d.at("w").to_vector() == std::vector<double>{1.5, -2.0});
    CHECK(d.at("n").item() == 258);
  }
  SECTION("deflated records and no byteorder record (PyTorch < 1.10)") {
    Pickle p;
    p.begin_dict().str("w").tensor("DoubleStorage", "0", 3, 0, {3}, {1}).end_dict();
    std::vector<ZipEntry> e{{"old/data.pkl", p.b, true}, {"old/data/0", le_bytes<double>({1, 2, 3}), true}};
    const Bytes z = make_zip(e);
    CHECK(io::parse_torch_archive(z.data(), z.size()).at("w").to_vector() == std::vector<double>{1, 2, 3});
  }
  SECTION("a float16 subnormal, infinity and NaN convert exactly") {
    CHECK(io::half_to_float(0x0001) == 0x1p-24f);
    CHECK(io::half_to_float(0x3c00) == 1.0f);
    CHECK(io::half_to_float(0xc000) == -2.0f);
    CHECK(std::isinf(io::half_to_float(0x7c00)));
    CHECK(std::isnan(io::half_to_float(0x7e00)));
    CHECK(io::bfloat16_to_float(0x3fc0) == 1.5f);
  }
  SECTION("a Parameter (torch._utils._rebuild_parameter), protocol 4 with MEMOIZE and SHORT_BINUNICODE") {
    Pickle p;
    p.begin_dict().op(0x8c).op(1).raw("p").op(0x94);
    p.global("torch._utils", "_rebuild_parameter").mark();
    p.tensor("FloatStorage", "0", 2, 0, {2}, {1}).op(0x88).global("collections", "OrderedDict").op(')').op('R');
    p.op('t').op('R').end_dict();
    p.b[1] = 4;  // PROTO 4
    const Bytes z = torch_zip(p.b, {{"0", le_bytes<float>({0.5f, -1.0f})}});
    CHECK(io::parse_torch_archive(z.data(), z.size()).at("p").to_vector() == std::vector<double>{0.5, -1.0});
  }
  SECTION("an empty state dict and zero-size tensors") {
    Pickle p;
    p.begin_dict().str("e").tensor("FloatStorage", "0", 0, 0, {0, 3}, {3, 1}).end_dict();
    const Bytes z = torch_zip(p.b, {{"0", {}}});
    const layers::StateDict d = io::parse_torch_archive(z.data(), z.size());
    CHECK(d.at("e").shape() == Shape{0, 3});
  }
}

TEST_CASE("torch.save refusals that name the fix: legacy files, pickled modules, long storage names", "[io][errors]") {
  SECTION("a legacy (PyTorch < 1.6) torch.save file, from memory, from a file and through io::load's detection") {
    const Bytes legacy = read_bytes(fixture("legacy.pt"));
    REQUIRE(legacy.size() > 16);
    CHECK_THAT(archive_error(legacy), Contains("a legacy torch.save file (PyTorch < 1.6 format)") &&
                                          Contains("_use_new_zipfile_serialization=True"));
    CHECK_THROWS_WITH(io::read_torch_file(fixture("legacy.pt")), Contains("legacy.pt': torch.save file: a legacy"));
    CHECK_THROWS_AS(io::detect_checkpoint_format(fixture("legacy.pt")), std::runtime_error);
    CHECK_THROWS_WITH(io::detect_checkpoint_format(fixture("legacy.pt")), Contains("PyTorch < 1.6 format"));
  }
  SECTION("a pickled nn.Module (torch.save(model)) suggests its state_dict()") {
    Pickle p;
    p.proto().global("torch.nn.modules.container", "Sequential").op(')').op(0x81).stop();
    CHECK_THAT(pickle_error(p), Contains("refusing global 'torch.nn.modules.container.Sequential'") &&
                                    Contains("save model.state_dict() instead"));
    Pickle q;
    q.proto().global("__main__", "Net").stop();
    CHECK_THAT(pickle_error(q), Contains("pickled nn.Module"));
    Pickle r;
    r.proto().global("os", "system").stop();
    CHECK_THAT(pickle_error(r), !Contains("nn.Module"));
  }
  SECTION("a storage location longer than 64 bytes, a memo index past the pickle's size") {
    Pickle p;
    p.proto().mark().str("storage").global("torch", "FloatStorage").str("0").str(std::string(100, 'c'));
    p.integer(1).op('t').op('Q').stop();
    CHECK_THAT(pickle_error(p), Contains("persistent id's location is 100 bytes long (at most 64)"));
    CHECK_THAT(pickle_error(Bytes{0x80, 2, 'N', 'r', 0xff, 0xff, 0xff, 0xff, '.'}),
               Contains("memo index 4294967295 at or past the pickle's 9 bytes"));
  }
  SECTION("memoized values are shared, not copied: one GET'd string is one value") {
    Pickle p;
    p.proto().str("abc").op('q').op(5).op(0x94).op('0').mark().op('h').op(5).op('h').op(1).op('h').op(5).op('t').stop();
    const io::TorchPickle t = io::unpickle_torch(p.b.data(), p.b.size());
    const auto& items = t.value(t.root).items;
    REQUIRE(items.size() == 3);
    CHECK(items[0] == items[1]);
    CHECK(items[1] == items[2]);
  }
}
