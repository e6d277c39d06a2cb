// Checkpoints: the safetensors reader/writer (round trips, a Python-written file, every
// corrupt-file case, atomic writes), module save/load with strict and non-strict key
// reports, weights-only files, the train_mlp golden state reproduced through a file, and
// exact resume of training (model + optimizer + scheduler + RNG).
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include <tapegrad/core/autograd.h>
#include <tapegrad/core/mode_checks.h>
#include <tapegrad/core/random.h>
#include <tapegrad/core/safetensors.h>
#include "golden_runner/support.h"
#include "safetensors_bytes_support.h"
#include "temp_dir_support.h"
#include "layers/checkpoint_run_support.h"
#include <tapegrad/layers/batch_norm.h>
#include <tapegrad/layers/checkpoint.h>
#include <tapegrad/layers/linear.h>
#include <tapegrad/layers/losses.h>
#include <tapegrad/layers/sequential.h>
#include <tapegrad/models/mlp.h>
#include <tapegrad/optim/optim.h>

using namespace tapegrad;
namespace fs = std::filesystem;

namespace {

using tapegrad::test::TempDir;

std::vector<std::uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

bool bitwise_equal(const Tensor& a, const Tensor& b) {
  return a.defined() && b.defined() && a.shape() == b.shape() && a.dtype() == b.dtype() &&
         std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
}

// The reader's message for a file's bytes, "" when they parse.
std::string parse_error(const std::vector<std::uint8_t>& bytes) { return test::safetensors_parse_error(bytes); }

// A file of a header text and data_bytes zero bytes that the reader refuses with a message
// holding every text of `says`.
struct Refusal {
  std::string header;
  std::size_t data_bytes;
  std::vector<std::string> says;
};
void require_refused(const std::vector<Refusal>& files) {
  for (const Refusal& r : files) {
    INFO("header " << r.header);
    const std::string message = parse_error(test::safetensors_file(r.header, nullptr, r.data_bytes));
    REQUIRE_FALSE(message.empty());
    for (const std::string& s : r.says) REQUIRE_THAT(message, Catch::Contains(s));
  }
}

// Block: fc -> norm (BatchNorm1d); Net: blocks = Sequential of three Blocks, head Linear.
struct Block : layers::Module {
  std::shared_ptr<layers::Linear> fc;
  std::shared_ptr<layers::BatchNorm1d> norm;
  Block(std::int64_t n, Generator& gen) {
    fc = register_module("fc", std::make_shared<layers::Linear>(n, n, true, Dtype::Float32, gen));
    norm = register_module("norm", std::make_shared<layers::BatchNorm1d>(n));
  }
  Tensor forward(const Tensor& x) override { return (*norm)((*fc)(x)); }
  std::string type_name() const override { return "Block"; }
};
struct Net : layers::Module {
  std::shared_ptr<layers::Sequential> blocks;
  std::shared_ptr<layers::Linear> head;
  explicit Net(std::uint64_t seed) {
    Generator gen(seed);
    blocks = register_module("blocks", std::make_shared<layers::Sequential>());
    for (int i = 0; i < 3; ++i) blocks->push_back(std::make_shared<Block>(4, gen));
    head = register_module("head", std::make_shared<layers::Linear>(4, 2, true, Dtype::Float32, gen));
  }
  Tensor forward(const Tensor& x) override { return (*head)((*blocks)(x)); }
  std::string type_name() const override { return "Net"; }
};

void train_a_bit(layers::Module& m, std::uint64_t seed) {
  Generator g(seed);
  m.train();
  NoGradGuard ng;
  for (int i = 0; i < 2; ++i) m(randn({5, 4}, Dtype::Float32, g));
}

}  // namespace

// ---- safetensors -----------------------------------------------------------------------

TEST_CASE("safetensors round trip: float32, float64, int64, scalars, empty tensors, metadata", "[checkpoint]") {
  TempDir dir;
  Generator g(3);
  const std::vector<std::pair<std::string, Tensor>> tensors = {
      {"b.f32", randn({3, 5}, Dtype::Float32, g)},
      {"a.f64", randn({2, 1, 3}, Dtype::Float64, g)},
      {"c.i64", Tensor::from_int64({-5, 0, 1ll << 62, 9007199254740993ll}, {2, 2})},
      {"scalar", Tensor::scalar(-0.0, Dtype::Float64)},
      {"empty", Tensor::zeros({0, 7}, Dtype::Float32)},
      {"inf", Tensor::from_vector({std::numeric_limits<double>::infinity(), std::nan("")}, {2}, Dtype::Float64)},
  };
  const std::map<std::string, std::string> md = {{"format", "test"}, {"note", "ünïcode ok"}};
  const std::string path = dir.file("t.safetensors");
  save_safetensors(path, tensors, md);
  const auto bytes = read_bytes(path);
  std::uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  REQUIRE(n % 8 == 0);  // data aligned like the reference writer
  const SafetensorsContent c = load_safetensors(path);
  REQUIRE(c.metadata == md);
  REQUIRE(c.tensors.size() == tensors.size());
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    INFO(tensors[i].first);
    REQUIRE(c.tensors[i].first == tensors[i].first);  // file (insertion) order
    REQUIRE(bitwise_equal(c.tensors[i].second, tensors[i].second));
  }
  REQUIRE(std::signbit(c.find("scalar")->item()));
  REQUIRE(c.find("nope") == nullptr);
  // The in-memory pair gives the same bytes.
  REQUIRE(serialize_safetensors(tensors, md) == bytes);
  // Names the writer refuses.
  REQUIRE_THROWS_WITH(serialize_safetensors({{"x", Tensor()}}), Catch::Contains("'x' is undefined"));
  REQUIRE_THROWS_WITH(serialize_safetensors({{"x", Tensor::scalar(1, Dtype::Float64)}, {"x", Tensor::scalar(2, Dtype::Float64)}}),
                      Catch::Contains("duplicate tensor name 'x'"));
  REQUIRE_THROWS_WITH(serialize_safetensors({{"__metadata__", Tensor::scalar(1, Dtype::Float64)}}), Catch::Contains("reserved"));
}

TEST_CASE("a safetensors file written by Python/numpy loads with the right values", "[checkpoint]") {
  // tests/fixtures/make_safetensors_fixture.py wrote it; its header lists the tensors in
  // reverse name order, the data is in the order below.
  const SafetensorsContent c = load_safetensors(std::string(TAPEGRAD_TESTS_DIR) + "/fixtures/python_written.safetensors");
  REQUIRE(c.metadata == std::map<std::string, std::string>{{"writer", "numpy"}, {"format", "pt"}});
  REQUIRE(c.tensors.size() == 5);
  REQUIRE(c.tensors[0].first == "weights.f32");
  REQUIRE(c.tensors[1].first == "stats.f64");
  REQUIRE(c.tensors[2].first == "counts.i64");
  REQUIRE(c.tensors[3].first == "scalar.f64");
  REQUIRE(c.tensors[4].first == "empty.f32");
  const Tensor& w = c.tensors[0].second;
  REQUIRE(w.dtype() == Dtype::Float32);
  REQUIRE(w.shape() == Shape{2, 3});
  const float want_w[] = {1.5f, -2.25f, 3.0f, 0.1f, 1e-8f, -7.0f};
  for (int i = 0; i < 6; ++i) REQUIRE(w.data<float>()[i] == want_w[i]);
  const Tensor& s = c.tensors[1].second;
  REQUIRE(s.dtype() == Dtype::Float64);
  REQUIRE(s.to_vector() == std::vector<double>{3.141592653589793, -2.718281828459045, 1e300});
  const Tensor& k = c.tensors[2].second;
  REQUIRE(k.dtype() == Dtype::Int64);
  REQUIRE(k.shape() == Shape{2, 2});
  const std::int64_t want_k[] = {0, -1, 1ll << 40, 9007199254740993ll};
  for (int i = 0; i < 4; ++i) REQUIRE(k.data<std::int64_t>()[i] == want_k[i]);
  REQUIRE(c.tensors[3].second.shape() == Shape{});
  REQUIRE(c.tensors[3].second.item() == 0.125);
  REQUIRE(c.tensors[4].second.shape() == Shape{0, 3});
}

TEST_CASE("corrupt or hostile safetensors files throw naming the problem and the byte offset", "[checkpoint]") {
  using Catch::Contains;
  const auto good = serialize_safetensors({{"a", Tensor::from_vector({1, 2}, {2}, Dtype::Float32)},
                                           {"b", Tensor::from_int64({7}, {1})}});
  REQUIRE_NOTHROW(parse_safetensors(good.data(), good.size()));
  std::uint64_t n = 0;
  std::memcpy(&n, good.data(), 8);

  SECTION("shorter than the length prefix") {
    std::vector<std::uint8_t> f(good.begin(), good.begin() + 5);
    REQUIRE_THAT(parse_error(f), Contains("5 bytes, shorter than the 8-byte header length") && Contains("offset 0"));
  }
  SECTION("truncated header: header length past the end of the file") {
    std::vector<std::uint8_t> f(good.begin(), good.begin() + 8 + static_cast<long>(n) - 3);
    REQUIRE_THAT(parse_error(f), Contains("header length " + std::to_string(n) + " runs past the end of the file"));
  }
  SECTION("header length above the 100 MB bound is rejected before any allocation") {
    auto f = good;
    const std::uint64_t huge = 1ull << 40;
    std::memcpy(f.data(), &huge, 8);
    REQUIRE_THAT(parse_error(f), Contains("exceeds the limit") && Contains("offset 0"));
  }
  SECTION("truncated data") {
    std::vector<std::uint8_t> f(good.begin(), good.end() - 4);
    REQUIRE_THAT(parse_error(f), Contains("entry 'b' data_offsets [8, 16] run past the end of the data (12 bytes"));
  }
  SECTION("bad JSON") {
    require_refused({
        // The second comma is header byte 61, file byte 8 + 61.
        {R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},, })", 4, {"not valid JSON", "offset 69"}},
        {"{\"a\": 1", 0, {"not valid JSON"}},
        {"[1, 2]  ", 0, {"does not start with '{'", "offset 8"}},
        {"{\"a\": [[[[1]]]]}", 0, {"nested deeper"}},
    });
  }
  SECTION("unknown dtype") {
    require_refused({
        {R"({"a": {"dtype": "BF16", "shape": [2], "data_offsets": [0, 4]}})", 4, {"unknown dtype 'BF16'", "offset 9"}},
    });
  }
  SECTION("overlapping offsets") {
    require_refused({
        {R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                           "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})", 12,
         {"data of 'b' [4, 12) overlaps 'a' [0, 8)"}},
    });
  }
  SECTION("a gap between tensors, and bytes after the last one") {
    require_refused({
        {R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
                           "b": {"dtype": "F32", "shape": [1], "data_offsets": [8, 12]}})", 12,
         {"not contiguous: 4 unused bytes before 'b'"}},
        {R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})", 9, {"5 bytes after the last tensor"}},
    });
  }
  SECTION("offsets out of range or reversed") {
    require_refused({
        {R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})", 4,
         {"run past the end of the data (4 bytes"}},
        {R"({"a": {"dtype": "F32", "shape": [0], "data_offsets": [4, 0]}})", 4, {"begin > end"}},
        {R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, -4]}})", 4, {"no data_offsets [begin, end]"}},
        {R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 18446744073709551615]}})", 4,
         {"run past the end of the data"}},
    });
  }
  SECTION("shape x dtype size differs from the byte count") {
    require_refused({
        {R"({"a": {"dtype": "F64", "shape": [2, 3], "data_offsets": [0, 12]}})", 12,
         {"entry 'a' shape [2, 3] F64 needs 48 bytes but data_offsets [0, 12] hold 12"}},
        {R"({"a": {"dtype": "F32", "shape": [4294967296, 4294967296], "data_offsets": [0, 16]}})", 16,
         {"holds more elements than the file's 16 data bytes"}},
        {R"({"a": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}})", 4, {"not a non-negative integer: -1"}},
        {R"({"a": {"dtype": "F32", "shape": [1.5], "data_offsets": [0, 4]}})", 4, {"not a non-negative integer: 1.5"}},
    });
  }
  SECTION("duplicate names, bad metadata, missing fields") {
    require_refused({
        {R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
                           "a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})", 8,
         {"duplicate tensor name 'a'"}},
        // an empty name, which save_safetensors cannot write (found by fuzz_safetensors)
        {R"({"": {"dtype": "F64", "shape": [], "data_offsets": [0, 8]}})", 8,
         {"a tensor has an empty name (expected a non-empty key)"}},
        {R"({"__metadata__": {"epoch": 3}})", 0, {"__metadata__ value of 'epoch' is not a string"}},
        {R"({"a": {"shape": [1], "data_offsets": [0, 4]}})", 4, {"entry 'a' has no dtype string"}},
        {R"({"a": 5})", 0, {"entry 'a' is not an object"}},
    });
  }
  SECTION("every truncation and many random byte flips throw or parse, never crash") {
    for (std::size_t len = 0; len < good.size(); ++len) {
      INFO("length " << len);
      REQUIRE_THROWS_AS(parse_safetensors(good.data(), len), std::runtime_error);
    }
    Generator g(11);
    for (int trial = 0; trial < 2000; ++trial) {
      auto f = good;
      const int flips = 1 + static_cast<int>(g.randint(3));
      for (int k = 0; k < flips; ++k)
        f[static_cast<std::size_t>(g.randint(static_cast<std::int64_t>(f.size())))] ^=
            static_cast<std::uint8_t>(1 + g.randint(255));
      try {
        const auto c = parse_safetensors(f.data(), f.size());
        std::size_t total = 0;
        for (auto& [name, t] : c.tensors) total += t.nbytes();
        REQUIRE(total <= f.size());
      } catch (const std::runtime_error&) {
      }
    }
  }
}

TEST_CASE("load_safetensors names the path of a missing or corrupt file", "[checkpoint]") {
  TempDir dir;
  REQUIRE_THROWS_WITH(load_safetensors(dir.file("missing.safetensors")), Catch::Contains("missing.safetensors"));
  std::ofstream(dir.file("junk.safetensors"), std::ios::binary) << "abc";
  REQUIRE_THROWS_WITH(load_safetensors(dir.file("junk.safetensors")),
                      Catch::Contains("junk.safetensors") && Catch::Contains("3 bytes"));
}

TEST_CASE("writes are atomic: a failed save leaves the old file byte-identical", "[checkpoint]") {
  TempDir dir;
  const std::string path = dir.file("model.safetensors");
  Net net(1);
  layers::save(net, path);
  const auto before = read_bytes(path);
  REQUIRE(before.size() > 100);
  Net other(2);

  SECTION("the disk fills up in the middle of the write") {
    testing::fail_writes_after(64);
    REQUIRE_THROWS_WITH(layers::save(other, path),
                        Catch::Contains("after 64 of") && Catch::Contains("the old file is unchanged"));
    testing::fail_writes_after(std::nullopt);
  }
  SECTION("a tensor that cannot be serialised") {
    REQUIRE_THROWS_AS(save_safetensors(path, {{"w", Tensor::scalar(1.0, Dtype::Float64)}, {"bad", Tensor()}}), std::invalid_argument);
  }
  REQUIRE(read_bytes(path) == before);
  std::size_t files = 0;
  for (auto& e : fs::directory_iterator(dir.path)) {
    (void)e;
    ++files;
  }
  REQUIRE(files == 1);  // no temp file left behind
  // The next save works and replaces the file.
  layers::save(other, path);
  REQUIRE(read_bytes(path) != before);
  REQUIRE_THROWS_WITH(layers::save(other, dir.file("no/such/dir/x.safetensors")),
                      Catch::Contains("cannot create a temp file"));
}

// ---- module checkpoints -------------------------------------------------------------------

TEST_CASE("module save/load restores nested parameters and buffers bit for bit", "[checkpoint]") {
  tapegrad::ModeChecksPause pause;  // train-mode forwards without gradients / fresh statistics on purpose
  TempDir dir;
  Net a(1);
  train_a_bit(a, 5);
  const auto keys = a.state_dict().keys();
  REQUIRE(std::find(keys.begin(), keys.end(), "blocks.2.norm.bias") != keys.end());
  REQUIRE(std::find(keys.begin(), keys.end(), "blocks.1.norm.num_batches_tracked") != keys.end());
  layers::save(a, dir.file("a.safetensors"));
  const auto c = load_safetensors(dir.file("a.safetensors"));
  REQUIRE(c.metadata.at("format") == "tapegrad-checkpoint");
  REQUIRE(c.metadata.at("content") == "parameters+buffers");
  REQUIRE(c.metadata.at("module") == "Net");

  Net b(99);
  REQUIRE_FALSE(bitwise_equal(a.state_dict().at("head.weight"), b.state_dict().at("head.weight")));
  const layers::LoadResult r = layers::load(b, dir.file("a.safetensors"));
  REQUIRE(r.ok());
  const auto sa = a.state_dict(), sb = b.state_dict();
  for (auto& [k, v] : sa) {
    INFO(k);
    REQUIRE(bitwise_equal(v, sb.at(k)));
  }
  REQUIRE(sb.at("blocks.0.norm.num_batches_tracked").item() == 2);
}

TEST_CASE("strict load lists every missing, unexpected and mismatched key; non-strict returns them",
          "[checkpoint]") {
  Net a(1), b(2);
  layers::StateDict d = a.state_dict();
  d.erase("blocks.2.norm.bias");
  d.insert("blocks.9.fc.weight", Tensor::zeros({4, 4}));
  d.insert("blocks.0.fc.weight", Tensor::zeros({4, 3}));
  d.insert("head.bias", Tensor::zeros({2}, Dtype::Float64));
  const Tensor before = b.state_dict().at("head.weight").clone();
  try {
    b.load_state_dict(d, true);
    FAIL("strict load should throw");
  } catch (const std::invalid_argument& e) {
    const std::string m = e.what();
    CHECK_THAT(m, Catch::Contains("Missing keys: blocks.2.norm.bias"));
    CHECK_THAT(m, Catch::Contains("Unexpected keys: blocks.9.fc.weight"));
    CHECK_THAT(m, Catch::Contains("blocks.0.fc.weight: expected [4, 4] float32, got [4, 3] float32"));
    CHECK_THAT(m, !Catch::Contains("head.bias"));  // float64 -> float32 is cast, even in a strict load
  }
  REQUIRE(bitwise_equal(b.state_dict().at("head.weight"), before));  // nothing loaded

  const layers::LoadResult r = b.load_state_dict(d, false);
  REQUIRE(r.missing_keys == std::vector<std::string>{"blocks.2.norm.bias"});
  REQUIRE(r.unexpected_keys == std::vector<std::string>{"blocks.9.fc.weight"});
  REQUIRE(r.mismatched.size() == 1);  // the shape mismatch; float64 -> float32 converts
  REQUIRE(r.converted == std::vector<std::string>{"head.bias: float64 -> float32"});
  REQUIRE(bitwise_equal(b.state_dict().at("head.weight"), a.state_dict().at("head.weight")));
  REQUIRE(b.state_dict().at("head.bias").at(0) == 0.0);
}

TEST_CASE("a weights-only checkpoint cannot be loaded strictly into a BN model", "[checkpoint]") {
  tapegrad::ModeChecksPause pause;  // train-mode forwards without gradients / fresh statistics on purpose
  TempDir dir;
  Net a(1);
  train_a_bit(a, 5);
  layers::save(a, dir.file("weights.safetensors"), /*include_buffers=*/false);
  const auto c = load_safetensors(dir.file("weights.safetensors"));
  REQUIRE(c.metadata.at("content") == "parameters");
  REQUIRE(c.find("blocks.0.norm.running_mean") == nullptr);
  REQUIRE(c.find("blocks.0.norm.weight") != nullptr);

  Net b(2);
  const auto stats_before = b.state_dict().at("blocks.0.norm.running_var").clone();
  REQUIRE_THROWS_WITH(layers::load(b, dir.file("weights.safetensors")),
                      Catch::Contains("blocks.0.norm.running_mean") && Catch::Contains("blocks.0.norm.running_var") &&
                          Catch::Contains("saved without buffers"));
  REQUIRE(bitwise_equal(b.state_dict().at("blocks.0.norm.running_var"), stats_before));
  const auto r = layers::load(b, dir.file("weights.safetensors"), /*strict=*/false);
  REQUIRE(r.missing_keys.size() == 9);  // 3 blocks x running_mean, running_var, num_batches_tracked
  REQUIRE(r.missing_keys[0] == "blocks.0.norm.running_mean");
}

TEST_CASE("train_mlp golden: the final state saved to a file reproduces the eval outputs", "[checkpoint][golden]") {
  TempDir dir;
  const auto doc = golden::read_json_file(std::string(TAPEGRAD_TESTS_DIR) + "/golden/train_mlp.json");
  for (const auto& c : doc["cases"]) {
    INFO(c["name"].get<std::string>());
    std::string missing;
    auto a = golden::build_sequential(c["model"]["layers"], Dtype::Float64, &missing);
    REQUIRE(a);
    layers::StateDict final_state;
    for (auto& [k, v] : c["final_state_dict"].items()) final_state.insert(k, golden::tensor_from_json(v, Dtype::Float64));
    a->load_state_dict(final_state, true);
    layers::save(*a, dir.file("final.safetensors"));

    auto b = golden::build_sequential(c["model"]["layers"], Dtype::Float64, &missing);
    layers::load(*b, dir.file("final.safetensors"));
    REQUIRE(b->state_dict().at("1.num_batches_tracked").item() == 5);
    for (const auto& s : c["steps"]) {
      if (s["mode"] != "eval") continue;
      b->eval();
      a->eval();
      NoGradGuard ng;
      const Tensor x = golden::tensor_from_json(s["input"], Dtype::Float64);
      const Tensor out = b->forward(x);
      REQUIRE(bitwise_equal(out, a->forward(x)));
      const std::string err = golden::compare("eval output", out, golden::tensor_from_json(s["expect"]["output"], Dtype::Float64),
                                              {1e-7, 1e-8, false});
      INFO(err);
      REQUIRE(err.empty());
    }
  }
}

// ---- exact resume -------------------------------------------------------------------------

using checkpoint_run::Run;
using checkpoint_run::make_run;
using checkpoint_run::train_steps;

TEST_CASE("resume is exact: 10 steps == 5 steps, save, load into fresh objects, 5 steps", "[checkpoint][optim]") {
  TempDir dir;
  for (bool adam : {false, true}) {
    INFO((adam ? "Adam + CosineAnnealingLR" : "SGD nesterov momentum + StepLR"));
    Run straight = make_run(adam, 1);
    train_steps(straight, 10);

    Run first = make_run(adam, 1);
    train_steps(first, 5);
    const std::string path = dir.file(adam ? "adam.ckpt" : "sgd.ckpt");
    optim::save_training_checkpoint(path, *first.model, *first.opt, 5, first.sched.get(), &first.data);

    Run resumed = make_run(adam, 77);  // different init and data seed: everything must come from the file
    resumed.data.manual_seed(999);
    REQUIRE(optim::load_training_checkpoint(path, *resumed.model, *resumed.opt, resumed.sched.get(),
                                            &resumed.data) == 5);
    train_steps(resumed, 5);

    const auto s1 = straight.model->state_dict(), s2 = resumed.model->state_dict();
    REQUIRE(s1.keys() == s2.keys());
    for (auto& [k, v] : s1) {
      INFO(k);
      REQUIRE(bitwise_equal(v, s2.at(k)));
    }
    REQUIRE(s2.at("1.num_batches_tracked").item() == 10);
    const auto o1 = straight.opt->state_dict(), o2 = resumed.opt->state_dict();
    REQUIRE(o1.keys() == o2.keys());
    for (auto& [k, v] : o1) {
      INFO(k);
      REQUIRE(bitwise_equal(v, o2.at(k)));
    }
    REQUIRE(straight.sched->get_last_lr() == resumed.sched->get_last_lr());
    REQUIRE(straight.data.get_state() == resumed.data.get_state());
  }
}

TEST_CASE("a training checkpoint that does not fit changes nothing", "[checkpoint][optim]") {
  TempDir dir;
  Run a = make_run(false, 1);
  train_steps(a, 2);
  const std::string path = dir.file("sgd.ckpt");
  optim::save_training_checkpoint(path, *a.model, *a.opt, 2, a.sched.get(), &a.data);

  Run adam = make_run(true, 5);
  const auto before = adam.model->state_dict().at("0.weight").clone();
  REQUIRE_THROWS_WITH(optim::load_training_checkpoint(path, *adam.model, *adam.opt, adam.sched.get(), &adam.data),
                      Catch::Contains("the file holds SGD state, the optimizer is Adam"));
  REQUIRE(bitwise_equal(adam.model->state_dict().at("0.weight"), before));

  Run b = make_run(false, 5);
  REQUIRE_THROWS_WITH(optim::load_training_checkpoint(path, *b.model, *b.opt, nullptr, &b.data),
                      Catch::Contains("the file holds scheduler 'StepLR'"));
  REQUIRE_THROWS_WITH(optim::load_training_checkpoint(path, *b.model, *b.opt, b.sched.get(), nullptr),
                      Catch::Contains("no generator was passed"));

  // Optimizer state that does not fit (another architecture's) rolls the model back.
  Run wide = make_run(false, 5);
  optim::SGD other({Tensor::zeros({3}).requires_grad_()}, {});
  optim::save_training_checkpoint(dir.file("mixed.ckpt"), *wide.model, other, 0);
  const auto w_before = wide.model->state_dict().at("0.weight").clone();
  Run c = make_run(false, 6);
  const auto c_before = c.model->state_dict().at("0.weight").clone();
  REQUIRE_THROWS_AS(optim::load_training_checkpoint(dir.file("mixed.ckpt"), *c.model, *c.opt), std::invalid_argument);
  REQUIRE(bitwise_equal(c.model->state_dict().at("0.weight"), c_before));
  REQUIRE_FALSE(bitwise_equal(c_before, w_before));
}
