// train/ callbacks on hand-made histories: EarlyStopping's decisions (worked examples), the
// progress lines off a terminal, the metrics log formats, the learning-curve figure, the
// history kept in checkpoints, and the preprocessing carried by a checkpoint.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include <tapegrad/core/ops/elementwise.h>
#include <tapegrad/data/dataloader.h>
#include <tapegrad/layers/losses.h>
#include <tapegrad/optim/sgd.h>
#include <tapegrad/train/early_stopping.h>
#include <tapegrad/train/fit.h>
#include <tapegrad/train/gnuplot.h>
#include <tapegrad/train/learning_curves.h>
#include <tapegrad/train/metrics_log.h>
#include <tapegrad/train/model_checkpoint.h>
#include <tapegrad/train/progress_bar.h>
#include "skip_support.h"
#include "train/train_test_support.h"

using namespace tapegrad;
using namespace tapegrad::train;
using train_test::TempDir;

namespace {

// Feeds `values` of `key` to a callback's on_epoch_end, one epoch each; returns the epoch
// after which it asked to stop (0: never).
int stop_epoch(Callback& cb, const std::string& key, const std::vector<double>& values) {
  TrainState s;
  s.epochs = static_cast<int>(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) {
    EpochLogs e;
    e.epoch = static_cast<int>(i) + 1;
    e.set(key, values[i]);
    s.history.push_back(e);
    s.epoch = e.epoch;
    cb.on_epoch_end(s);
    if (s.stop_training) return e.epoch;
  }
  return 0;
}

std::string read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::vector<EpochLogs> sample_history() {
  std::vector<EpochLogs> h(3);
  const double loss[] = {0.9, 0.6, 0.5}, val[] = {0.8, 0.7, 0.75}, acc[] = {0.61, 0.72, 0.7};
  for (int i = 0; i < 3; ++i) {
    h[static_cast<std::size_t>(i)].epoch = i + 1;
    h[static_cast<std::size_t>(i)].set("loss", loss[i]);
    h[static_cast<std::size_t>(i)].set("val_loss", val[i]);
    h[static_cast<std::size_t>(i)].set("val_accuracy", acc[i]);
  }
  h[1].set("extra", 0.1);  // a value only one epoch logged
  return h;
}


// A ModelCheckpoint whose file is never written: only its state is loaded.
ModelCheckpointOptions unwritten() {
  ModelCheckpointOptions mo;
  mo.path = "unused.safetensors";
  return mo;
}
}  // namespace

TEST_CASE("EarlyStopping: patience, min_delta and mode, worked examples", "[train][early_stopping]") {
  {  // min, min_delta 0.02, patience 2: 1.0 (best), 0.9 (< 0.98: best), 0.95 (wait 1),
     // 0.89 (not < 0.88: wait 2) -> stop after epoch 4.
    EarlyStopping es({"val_loss", Mode::Min, 0.02, 2});
    CHECK(stop_epoch(es, "val_loss", {1.0, 0.9, 0.95, 0.89, 0.5}) == 4);
    CHECK(es.best() == 0.9);
    CHECK(es.best_epoch() == 2);
    CHECK(es.stopped_epoch() == 4);
  }
  {  // the same values without min_delta: 0.89 improves, 0.5 improves: never stops.
    EarlyStopping es({"val_loss", Mode::Min, 0.0, 2});
    CHECK(stop_epoch(es, "val_loss", {1.0, 0.9, 0.95, 0.89, 0.5}) == 0);
    CHECK(es.best_epoch() == 5);
  }
  {  // max, patience 1: 0.5, 0.6 (best), 0.6 (equal is no improvement) -> stop after 3.
    EarlyStopping es({"val_accuracy", Mode::Max, 0.0, 1});
    CHECK(stop_epoch(es, "val_accuracy", {0.5, 0.6, 0.6, 0.9}) == 3);
  }
  {  // patience 0 stops at the first epoch without improvement; the wait resets on improvement.
    EarlyStopping es({"loss", Mode::Min, 0.0, 0});
    CHECK(stop_epoch(es, "loss", {3, 2, 1, 1.5}) == 4);
  }
  {  // a NaN is not a value to compare: an error, the state unchanged
    EarlyStopping es({"val_loss", Mode::Min, 0.0, 5});
    CHECK_THROWS_WITH(stop_epoch(es, "val_loss", {1.0, std::nan("")}),
                      Catch::Contains("monitor 'val_loss' is nan at epoch 2"));
    CHECK(es.best() == 1.0);
    CHECK(es.stopped_epoch() == 0);
  }
  {  // the state round-trips: a restored callback continues the count
    EarlyStopping a({"val_loss", Mode::Min, 0.0, 3});
    CHECK(stop_epoch(a, "val_loss", {1.0, 1.1, 1.2}) == 0);
    EarlyStopping b({"val_loss", Mode::Min, 0.0, 3});
    b.load_state_dict(a.state_dict());
    CHECK(b.best() == 1.0);
    CHECK(b.wait() == 2);
    EarlyStopping other({"val_accuracy", Mode::Max, 0.0, 3});
    CHECK_THROWS_WITH(other.load_state_dict(a.state_dict()),
                      Catch::Contains("monitored 'val_loss', this run monitors 'val_accuracy'"));
    auto bad = a.state_dict();
    bad["wait"] = "two";
    CHECK_THROWS_WITH(b.load_state_dict(bad), Catch::Contains("wait: expected a count (an integer in [0, 1e9]), got 'two'"));
  }
  CHECK_THROWS_WITH(EarlyStopping({"val_loss", Mode::Min, -0.1, 3}), Catch::Contains("min_delta >= 0"));
  CHECK_THROWS_WITH(EarlyStopping({"val_loss", Mode::Min, 0.0, -1}), Catch::Contains("patience >= 0, got -1"));
  CHECK_THROWS_WITH(parse_mode("maximum"), Catch::Contains("expected min or max, got 'maximum'"));
  CHECK(format_double(0.1) == "0.10000000000000001");
  CHECK(parse_double(format_double(0.1), "x") == 0.1);
}

TEST_CASE("ProgressBar off a terminal writes one plain line per epoch", "[train][progress]") {
  std::FILE* f = std::tmpfile();
  REQUIRE(f);
  ProgressBarOptions o;
  o.stream = f;
  ProgressBar bar(o);
  CHECK_FALSE(bar.drawing());  // a file is not a terminal
  TrainState s;
  s.epochs = 3;
  s.batches = 4;
  for (const auto& e : sample_history()) {
    s.epoch = e.epoch;
    bar.on_epoch_begin(s);
    for (s.batch = 1; s.batch <= 4; ++s.batch) bar.on_batch_end(s);
    s.history.push_back(e);
    s.history.back().set("seconds", 1.25);
    bar.on_epoch_end(s);
  }
  std::rewind(f);
  char buf[4096] = {};
  const std::size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  const std::string text(buf, n);
  CHECK(text ==
        "epoch 1/3: loss 0.9, val_loss 0.8, val_accuracy 0.61 (1.2 s)\n"
        "epoch 2/3: loss 0.6, val_loss 0.7, val_accuracy 0.72 (1.2 s)\n"
        "epoch 3/3: loss 0.5, val_loss 0.75, val_accuracy 0.7 (1.2 s)\n");
}

TEST_CASE("MetricsLog writes CSV or JSON lines with every epoch; the history round-trips", "[train][metrics_log]") {
  const auto h = sample_history();
  CHECK(history_csv(h) ==
        "epoch,loss,val_loss,val_accuracy,extra\n"
        "1,0.90000000000000002,0.80000000000000004,0.60999999999999999,\n"
        "2,0.59999999999999998,0.69999999999999996,0.71999999999999997,0.10000000000000001\n"
        "3,0.5,0.75,0.69999999999999996,\n");
  const std::string jl = history_json_lines(h);
  CHECK(jl.substr(0, jl.find('\n')) == R"({"epoch":1,"loss":0.9,"val_loss":0.8,"val_accuracy":0.61})");
  CHECK(std::count(jl.begin(), jl.end(), '\n') == 3);

  std::vector<EpochLogs> odd = h;
  odd[2].set("val_loss", std::nan(""));
  odd[2].set("lr", HUGE_VAL);
  const auto back = history_from_json(history_to_json(odd));
  REQUIRE(back.size() == 3);
  CHECK(back[1].values == odd[1].values);
  CHECK(std::isnan(back[2].get("val_loss")));
  CHECK(back[2].get("lr") == HUGE_VAL);
  CHECK_THROWS_WITH(history_from_json("[{\"loss\": 1}]"), Catch::Contains("integer \"epoch\""));
  CHECK_THROWS_WITH(history_from_json("{"), Catch::Contains("malformed JSON"));
  CHECK_THROWS_WITH(h[0].get("val_f1"), Catch::Contains("no 'val_f1'") && Catch::Contains("loss, val_loss, val_accuracy"));

  TempDir dir;
  TrainState s;
  s.history = h;
  MetricsLog csv({dir.file("log.csv")}), jsonl({dir.file("log.jsonl")});
  CHECK(jsonl.format() == LogFormat::JsonLines);
  csv.on_fit_begin(s);
  csv.after_epoch_end(s);
  jsonl.after_epoch_end(s);
  CHECK(read_text(dir.file("log.csv")) == history_csv(h));
  CHECK(read_text(dir.file("log.jsonl")) == jl);
  MetricsLog into_dir({dir.path.string()});
  CHECK_THROWS_WITH(into_dir.on_fit_begin(s), Catch::Contains("is a directory"));
}

TEST_CASE("LearningCurves draws the PNG through gnuplot without a shell", "[train][learning_curves]") {
  TempDir dir;
  LearningCurvesOptions o;
  o.path = dir.file("it's curves.png");  // a quote and a space: passed as a gnuplot string
  o.title = "blobs";
  LearningCurves lc(o);
  TrainState s;
  s.history = sample_history();
  const std::string script = lc.script(s.history);
  CHECK_THAT(script, Catch::Contains("set output '" + dir.file("it''s curves.png") + "'"));
  CHECK_THAT(script, Catch::Contains("title 'val\\_accuracy'") && Catch::Contains("$d0_1 << EOD\n1 0.80000000000000004\n"));
  if (!gnuplot_available()) TAPEGRAD_MISSING("gnuplot with pngcairo not installed (gnuplot-nox, scripts/setup.sh): the figure is not checked");
  lc.on_fit_begin(s);
  lc.on_fit_end(s);
  REQUIRE(lc.written());
  CHECK(read_text(o.path).substr(0, 4) == "\x89PNG");
  CHECK(read_text(o.path + ".gp") == script);
  LearningCurvesOptions bad;
  bad.path = dir.file("a\nb.png");
  CHECK_THROWS_WITH(LearningCurves(bad), Catch::Contains("newline"));
}

TEST_CASE("gnuplot_text shows a text as written in enhanced mode", "[train][learning_curves]") {
  // Enhanced text reads _ ^ as sub/superscripts, {} as grouping, @ & ~ as boxes and overprints.
  CHECK(gnuplot_text("val_loss") == "'val\\_loss'");
  CHECK(gnuplot_text("a^2 {b} @c &d ~e \\f") == "'a\\^2 \\{b\\} \\@c \\&d \\~e \\\\f'");
  CHECK(gnuplot_text("it's $(x) `y`") == "'it''s $(x) `y`'");  // nothing is substituted in single quotes
  CHECK(gnuplot_text("two\nlines") == "'two'.\"\\n\".'lines'");
  CHECK(gnuplot_text("") == "''");
  CHECK_THROWS_WITH(gnuplot_text("a\rb"), Catch::Contains("carriage return"));
}

TEST_CASE("LearningCurves shows keys and title as written: val_loss is not val with a subscript l",
          "[train][learning_curves]") {
  TempDir dir;
  LearningCurvesOptions o;
  o.path = dir.file("curves.png");
  o.title = "run_2 {lr^2}";
  LearningCurves lc(o);
  const std::string script = lc.script(sample_history());
  CHECK_THAT(script, Catch::Contains("title 'loss'") && Catch::Contains("title 'val\\_loss'") &&
                         Catch::Contains("title 'val\\_accuracy'") && Catch::Contains("title 'run\\_2 \\{lr\\^2\\}'"));
  CHECK_THAT(script, !Catch::Contains("'val_loss'") && !Catch::Contains("'val_accuracy'"));
  LearningCurvesOptions cr = o;
  cr.panels = {{"a\rb"}};
  CHECK_THROWS_WITH(LearningCurves(cr), Catch::Contains("carriage return"));
  if (!gnuplot_available()) TAPEGRAD_MISSING("gnuplot with pngcairo not installed (gnuplot-nox, scripts/setup.sh): the figure is not checked");
  TrainState s;
  s.history = sample_history();
  lc.on_fit_begin(s);
  lc.on_fit_end(s);
  REQUIRE(lc.written());
  CHECK(read_text(o.path).substr(0, 4) == "\x89PNG");
}

TEST_CASE("a checkpoint carries the preprocessing: a fresh model predicts a raw row as the trained one", "[train][checkpoint]") {
  TempDir dir;
  Generator gen(3), init(4);
  const data::Dataset raw = train_test::blobs(200, 5);
  // Raw features shifted and scaled, so the standardisation matters.
  const data::Dataset shifted = data::Dataset::make(raw.X * 10.0 + 50.0, raw.y);
  const data::Standardizer st = data::Standardizer::fit(shifted.X);  // per feature
  auto model = train_test::mlp(init, &gen);
  optim::SGD opt(model->parameters(), optim::SGDOptions{0.1, 0.9});
  data::DataLoader loader(st.transform(shifted), {25, true, true}, gen);
  FitOptions o;
  o.epochs = 2;
  o.generator = &gen;
  o.checkpoint_extras = standardizer_extras(st);
  o.checkpoint_extras.metadata["run.model"] = "mlp 8,16,3 batch";
  ModelCheckpointOptions mc;
  mc.path = dir.file("best.safetensors");
  mc.monitor = "loss";
  fit(*model, loader, layers::CrossEntropyLoss{}, opt, nullptr, o, {std::make_shared<ModelCheckpoint>(mc)});

  Generator g1(0), g2(0);
  auto fresh = train_test::mlp(g1, &g2);
  const LoadedCheckpoint c = load_model(dir.file("best.safetensors"), *fresh);
  CHECK(c.extras.metadata.at("run.model") == "mlp 8,16,3 batch");
  CHECK(c.extras.metadata.at("preprocess.recipe") == "input = (x - preprocess.mean) / preprocess.std");
  CHECK(c.find("optimizer.state.0.momentum_buffer") == nullptr);  // only the extras
  const data::Standardizer back = read_standardizer(c);
  CHECK(back.mean() == st.mean());
  CHECK(back.stddev() == st.stddev());
  const Tensor row = shifted.slice(0, 1).X;
  const Tensor expected = predict(*model, st.transform(row));
  const Tensor got = predict(*fresh, back.transform(row));
  CHECK(got.to_vector() == expected.to_vector());
  CHECK(accuracy(predict(*fresh, back.transform(shifted.X)), shifted.y) > 0.8);
  CHECK(back.per_feature());
  CHECK_THROWS_WITH(read_standardizer(c, "scaler."), Catch::Contains("no scaler.mean / scaler.std"));
  LoadedCheckpoint broken = c;  // statistics without their feature shape
  std::erase_if(broken.extras.tensors, [](const auto& kv) { return kv.first == "preprocess.feature_shape"; });
  CHECK_THROWS_WITH(read_standardizer(broken), Catch::Contains("read_standardizer") && Catch::Contains("feature_shape"));
}

TEST_CASE("Callback states and the history read counts and epochs as whole integers naming the key", "[train][errors]") {
  // each was read through strtod: "1e3" gave 1000, "0x10" 16, " 5" 5; the epoch of the history
  // through get<int>, 4294967297 gave 1
  {
    EarlyStopping es({"val_loss", Mode::Min, 0.0, 3});
    es.load_state_dict({{"monitor", "val_loss"}, {"best", "1"}, {"best_epoch", "2"}, {"wait", "16"}});
    CHECK(es.wait() == 16);
  }
  for (const std::string v : {"1e3", "0x10", " 5", "+5", "5.0", "16.9", "-1", "nan", "1000000001", "99999999999999999999", ""}) {
    INFO("'" << v << "'");
    EarlyStopping es({"val_loss", Mode::Min, 0.0, 3});
    std::map<std::string, std::string> s{{"monitor", "val_loss"}, {"best", "1"}, {"best_epoch", "2"}, {"wait", v}};
    CHECK_THROWS_WITH(es.load_state_dict(s), Catch::Contains("wait: expected a count") && Catch::Contains("got '" + v + "'"));
    CHECK(es.wait() == 0);  // nothing loaded
    ModelCheckpoint mc(unwritten());
    CHECK_THROWS_WITH(mc.load_state_dict({{"monitor", "val_loss"}, {"best_epoch", v}}),
                      Catch::Contains("best_epoch: expected a count") && Catch::Contains("got '" + v + "'"));
  }
  // best and best_epoch agree: nan exactly when no epoch improved (was: best 'nan' with
  // best_epoch 3 loaded, and the next epoch's value became the best of epoch 3)
  for (const auto& [best, epoch] : std::vector<std::pair<std::string, std::string>>{
           {"nan", "3"}, {"inf", "2"}, {"-inf", "1"}, {"0.5", "0"}}) {
    INFO(best << " at " << epoch);
    // each callback refuses the pair and keeps its state
    const auto refuses = [&](auto& callback) {
      CHECK_THROWS_WITH(callback.load_state_dict({{"monitor", "val_loss"}, {"best", best}, {"best_epoch", epoch}}),
                        Catch::Contains("best: expected") && Catch::Contains("best_epoch " + epoch) && Catch::Contains(best));
      CHECK(callback.best_epoch() == 0);
    };
    EarlyStopping es({"val_loss", Mode::Min, 0.0, 3});
    refuses(es);
    ModelCheckpoint mc(unwritten());
    refuses(mc);
  }
  {
    ModelCheckpoint mc(unwritten());
    mc.load_state_dict({{"monitor", "val_loss"}, {"best", "nan"}, {"best_epoch", "0"}});  // none yet: accepted
    CHECK(mc.best_epoch() == 0);
    mc.load_state_dict({{"monitor", "val_loss"}, {"best", "0.25"}, {"best_epoch", "2"}});
    CHECK(mc.best() == 0.25);
    CHECK(mc.best_epoch() == 2);
  }
  CHECK_THROWS_WITH(history_from_json("[{\"epoch\": 4294967297, \"loss\": 1}]"),
                    Catch::Contains("expected an integer \"epoch\" in [0, 1e9], got 4294967297"));
  CHECK_THROWS_WITH(history_from_json("[{\"epoch\": -1, \"loss\": 1}]"), Catch::Contains("got -1"));
  CHECK(history_from_json("[{\"epoch\": 3, \"loss\": 1}]").at(0).epoch == 3);
}
