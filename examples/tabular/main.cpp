// tabular: an MLP on any numeric CSV, scored by k-fold cross-validation.
//
//   tabular --csv data.csv --label species            # classification: accuracy per fold
//   tabular --csv house.csv.gz --label price          # regression: R² per fold
//
// Per fold (data::KFold, shuffled with --seed): the training rows lose a validation part
// (--val-fraction), a per-feature Standardizer (scikit-learn's StandardScaler) is fitted on
// the rest, an MLP (ReLU, --hidden widths) trains with Adam under train::fit, early stopping
// on the validation loss restores the best epoch's weights, and the held-out fold is scored
// (train::accuracy or train::r2_score). Regression targets are standardised with the training
// rows' mean and std for training; R² is computed on the original scale.
#include <CLI/CLI.hpp>
#include "cli_checks.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#include <tapegrad/tapegrad.h>

using namespace tapegrad;

namespace {

struct Config {
  std::string csv, label, task = "auto", hidden = "100", fold_ids;
  std::int64_t folds = 5, skip_rows = 0, batch_size = 64, max_classes = 20;
  std::uint64_t seed = 0;
  int epochs = 200, patience = 10;
  double lr = 1e-3, weight_decay = 0.0, val_fraction = 0.1;
  bool no_header = false;
  char delimiter = ',';
};

std::vector<std::int64_t> parse_hidden(const std::string& text) {
  std::vector<std::int64_t> sizes;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    const std::string item = text.substr(start, comma - start);
    std::size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (item.empty() || used != item.size() || v < 1)
      throw std::invalid_argument("--hidden: expected comma-separated widths >= 1 (e.g. 100 or 64,32), got '" + text + "'");
    sizes.push_back(v);
    start = comma + 1;
  }
  return sizes;
}

std::string g(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// Every option, in one place, however it was spelled on the command line (--lr 1, --lr=1):
// throws std::invalid_argument naming the option, the expected and the given value.
void check_config(const Config& c) {
  auto range = [](const char* option, long long v, long long lo, long long hi) {
    if (v < lo || v > hi)
      throw std::invalid_argument(std::string(option) + ": expected an integer in [" + std::to_string(lo) + ", " +
                                  std::to_string(hi) + "], got " + std::to_string(v));
  };
  range("--folds", c.folds, 2, 1000);
  range("--max-classes", c.max_classes, 2, 1 << 20);
  range("--skip-rows", c.skip_rows, 0, 1 << 30);
  range("--epochs", c.epochs, 1, 100000);
  range("--patience", c.patience, 0, 100000);
  range("--batch-size", c.batch_size, 1, 1 << 24);
  if (!(c.lr > 0 && std::isfinite(c.lr)))
    throw std::invalid_argument("--lr: expected a finite number > 0, got " + g(c.lr));
  if (!(c.weight_decay >= 0 && std::isfinite(c.weight_decay)))
    throw std::invalid_argument("--weight-decay: expected a finite number >= 0, got " + g(c.weight_decay));
  if (!(c.val_fraction > 0 && c.val_fraction < 1))
    throw std::invalid_argument("--val-fraction: expected a fraction in (0, 1), got " + g(c.val_fraction));
  if (c.delimiter == '"' || c.delimiter == '\n' || c.delimiter == '\r' || c.delimiter == '\0')
    throw std::invalid_argument("--delimiter: expected a field separator other than a quote or a line break");
  parse_hidden(c.hidden);
  std::error_code ec;  // writing the fold ids over the CSV would replace the data
  if (!c.fold_ids.empty() && std::filesystem::equivalent(c.csv, c.fold_ids, ec))
    throw std::invalid_argument("--fold-ids: '" + c.fold_ids + "' is the --csv file '" + c.csv +
                                "'; writing it would destroy the data");
}

// An integer is a 0-based column index (negative: from the end); anything else a header name.
data::CsvColumn parse_column(const std::string& text) {
  if (text.empty()) return data::CsvColumn(-1);
  std::size_t used = 0;
  try {
    const long long v = std::stoll(text, &used);
    if (used == text.size()) return data::CsvColumn(static_cast<std::int64_t>(v));
  } catch (const std::exception&) {
  }
  return data::CsvColumn(text);
}

// A numeric label column holding one value: neither task can learn from it (R² and
// accuracy would be reported for nothing). Throws std::invalid_argument naming the value.
void check_label_varies(const data::Dataset& d) {
  const std::vector<double> y = d.y.to_vector();
  for (double v : y)
    if (v != y.front()) return;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", y.empty() ? 0.0 : y.front());
  throw std::invalid_argument("the label column holds one value (" + std::string(buf) + ") in all " +
                              std::to_string(y.size()) + " rows: expected at least 2 distinct labels (classification "
                              "needs 2 classes, regression a label that varies)");
}

// Integer-valued float targets with at most max_classes distinct values become classes
// 0..k-1 (sorted values; class_names their text unless they already are 0..k-1).
bool as_classes(data::Dataset& d, std::int64_t max_classes) {
  const std::vector<double> y = d.y.to_vector();
  std::map<double, std::int64_t> distinct;
  for (double v : y) {
    if (v != std::floor(v)) return false;
    distinct.emplace(v, 0);
    if (static_cast<std::int64_t>(distinct.size()) > max_classes) return false;
  }
  if (distinct.size() < 2) return false;
  std::int64_t k = 0;
  bool plain = true;
  std::vector<std::string> names;
  for (auto& [v, idx] : distinct) {
    plain = plain && v == static_cast<double>(k);
    idx = k++;
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.0f", v);
    names.emplace_back(buf);
  }
  std::vector<std::int64_t> classes;
  classes.reserve(y.size());
  for (double v : y) classes.push_back(distinct.at(v));
  d = data::Dataset::make(d.X, Tensor::from_int64(classes, {d.size()}), plain ? std::vector<std::string>{} : names);
  return true;
}

// Integer class labels that are not 0..k-1 (e.g. 7 and 1000000000) become classes 0..k-1 in
// sorted order with their text as class names, so the model has one output per distinct
// label rather than one per index up to the largest.
void dense_classes(data::Dataset& d) {
  if (!d.class_names.empty()) return;  // string labels: already 0..k-1
  const std::int64_t* y = d.y.data<std::int64_t>();
  std::map<std::int64_t, std::int64_t> distinct;
  for (std::int64_t i = 0; i < d.size(); ++i) distinct.emplace(y[i], 0);
  std::int64_t k = 0;
  bool plain = true;
  std::vector<std::string> names;
  for (auto& [v, idx] : distinct) {
    plain = plain && v == k;
    idx = k++;
    names.push_back(std::to_string(v));
  }
  if (plain) return;
  std::vector<std::int64_t> classes;
  classes.reserve(static_cast<std::size_t>(d.size()));
  for (std::int64_t i = 0; i < d.size(); ++i) classes.push_back(distinct.at(y[i]));
  d = data::Dataset::make(d.X, Tensor::from_int64(classes, {d.size()}), names);
}

// --task auto: numeric labels that are integers with few distinct values are classes, other
// numbers regression targets, text labels classes.
data::Dataset load(const Config& c, bool& classification) {
  data::CsvOptions o;
  o.label = parse_column(c.label);
  o.delimiter = c.delimiter;
  o.header = !c.no_header;
  o.skip_rows = c.skip_rows;
  if (c.task == "classification" || c.task == "regression") {
    classification = c.task == "classification";
    o.task = classification ? data::CsvTask::Classification : data::CsvTask::Regression;
    data::Dataset d = data::read_csv(c.csv, o);
    if (classification)
      dense_classes(d);
    else
      check_label_varies(d);
    return d;
  }
  o.task = data::CsvTask::Regression;
  data::Dataset d;
  try {
    d = data::read_csv(c.csv, o);
  } catch (const std::invalid_argument& numeric_error) {  // text labels (or a bad file: the class read says why)
    o.task = data::CsvTask::Classification;
    classification = true;
    data::Dataset text = data::read_csv(c.csv, o);
    // Labels that all read as numbers are numbers: one of them is not finite in float32
    // ("nan", "1e308"), which the numeric read named. Taking them as text made every value a
    // class (a regression set scored as 40 classes).
    const auto is_number = [](const std::string& v) {
      char* end = nullptr;
      (void)std::strtod(v.c_str(), &end);
      return !v.empty() && end == v.c_str() + v.size();
    };
    if (std::all_of(text.class_names.begin(), text.class_names.end(), is_number)) throw numeric_error;
    return text;
  }
  check_label_varies(d);
  classification = as_classes(d, c.max_classes);
  return d;
}

struct Moments {
  double mean = 0, std = 1;
};

// The targets' mean and std as a Standardizer fits them (std 1 only for a constant target,
// by scikit-learn's relative bound: targets in small units are still scaled).
Moments moments(const Tensor& y) {
  const data::Standardizer s = data::Standardizer::fit(y);
  return {s.mean()[0], s.stddev()[0]};
}

struct FoldResult {
  double score = 0, seconds = 0;
  int epochs = 0, best_epoch = 0;
};

FoldResult run_fold(const Config& c, const data::Dataset& full, const data::Fold& fold, bool classification,
                    std::int64_t outputs, const std::vector<std::int64_t>& hidden, Generator& gen) {
  const auto t0 = std::chrono::steady_clock::now();
  const data::Dataset train_all = full.take(fold.train), test = full.take(fold.test);
  const auto val_rows = std::max<std::int64_t>(1, static_cast<std::int64_t>(std::llround(c.val_fraction * static_cast<double>(train_all.size()))));
  if (train_all.size() - val_rows < 2)
    throw std::invalid_argument("a training fold of " + std::to_string(train_all.size()) +
                                " rows leaves fewer than 2 rows to train on after the validation split; use fewer --folds or more data");
  data::TrainValSplit split = data::train_val_split(train_all, val_rows, gen);
  const data::Standardizer scaler = data::Standardizer::fit(split.train.X);  // per feature, training rows only
  Moments ym;
  auto prepare = [&](const data::Dataset& d) {
    data::Dataset s = scaler.transform(d);
    if (classification) return s;
    const Tensor y = reshape((s.y - ym.mean) * (1.0 / ym.std), {s.size(), 1});
    return data::Dataset::make(s.X, y);
  };
  if (!classification) ym = moments(split.train.y);
  const data::Dataset tr = prepare(split.train), va = prepare(split.val);

  std::vector<std::int64_t> sizes{full.num_features()};
  sizes.insert(sizes.end(), hidden.begin(), hidden.end());
  sizes.push_back(outputs);
  std::unique_ptr<models::MLP> built;
  try {
    built = std::make_unique<models::MLP>(sizes, models::MLPOptions{}, gen);
  } catch (const std::bad_alloc&) {  // a huge --hidden: name it, not "std::bad_alloc"
    throw std::runtime_error("--hidden " + c.hidden + ": out of memory allocating the parameters; use smaller widths");
  }
  models::MLP& model = *built;
  optim::Adam opt(model.parameters(), {.lr = c.lr, .weight_decay = c.weight_decay});
  const std::int64_t batch = std::min(c.batch_size, tr.size());
  data::DataLoader loader(tr, {.batch_size = batch, .shuffle = true, .drop_last = false}, gen);
  train::FitOptions fo;
  fo.epochs = c.epochs;
  fo.validation = &va;
  fo.generator = &gen;
  train::LossFn loss = classification ? train::LossFn(layers::CrossEntropyLoss{}) : train::LossFn(layers::MSELoss{});
  auto stop = std::make_shared<train::EarlyStopping>(
      train::EarlyStoppingOptions{"val_loss", train::Mode::Min, 0.0, c.patience, /*restore_best_weights=*/true});
  const train::FitResult r = train::fit(model, loader, loss, opt, nullptr, fo, {stop});

  FoldResult out;
  const Tensor pred = train::predict(model, scaler.transform(test.X));
  if (classification) {
    out.score = train::accuracy(pred, test.y);
  } else {
    const Tensor unscaled = reshape(pred * ym.std + ym.mean, {test.size()});
    out.score = train::r2_score(unscaled, test.y);
  }
  if (!std::isfinite(out.score))  // the metrics refuse non-finite predictions; a last guard before printing
    throw std::runtime_error(std::string(classification ? "accuracy" : "R2") + " of the fold is " + g(out.score) +
                             ": not a result");
  out.epochs = r.epochs_run;
  out.best_epoch = stop->best_epoch();
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  Config c;
  CLI::App app{"tabular: an MLP on a numeric CSV, scored by k-fold cross-validation"};
  app.add_option("--csv", c.csv, "the CSV file (plain or gzip)")
      ->check(tapegrad_cli::non_empty("a CSV file"))->required();
  app.add_option("--label", c.label,
                 "the label column: a header name, or a 0-based index (negative from the end; default: the last)");
  app.add_option("--task", c.task,
                 "classification | regression | auto (integer labels with at most --max-classes values, or text: "
                 "classification; other numbers: regression)")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "classification", "regression"}));
  app.add_option("--max-classes", c.max_classes, "auto: most distinct integer labels still taken as classes")
      ->capture_default_str();
  app.add_option("--folds", c.folds, "k of k-fold cross-validation")->capture_default_str();
  // CLI11 reads "-1" and 2^64 into an unsigned seed as 2^64 - 1: refused, however spelled
  // (--seed -1, --seed=-1), before the conversion.
  app.add_option("--seed", c.seed, "seed of the folds, the validation splits, the weights and the shuffles")
      ->capture_default_str()
      ->check(tapegrad_cli::non_negative());
  app.add_option("--skip-rows", c.skip_rows, "lines to skip before the header (or the first row)")
      ->capture_default_str();
  app.add_flag("--no-header", c.no_header, "the first (unskipped) line is data; columns are named by index");
  app.add_option("--delimiter", c.delimiter, "field separator")->capture_default_str();
  app.add_option("--hidden", c.hidden, "hidden widths, comma-separated")->capture_default_str();
  app.add_option("--epochs", c.epochs, "most epochs per fold")->capture_default_str();
  app.add_option("--patience", c.patience, "early stopping: epochs without a lower validation loss")
      ->capture_default_str();
  app.add_option("--batch-size", c.batch_size, "mini-batch rows")->capture_default_str();
  app.add_option("--lr", c.lr, "Adam's learning rate")->capture_default_str();
  app.add_option("--weight-decay", c.weight_decay, "Adam's L2 penalty")->capture_default_str();
  app.add_option("--val-fraction", c.val_fraction, "part of each training fold held out for early stopping")
      ->capture_default_str();
  app.add_option("--fold-ids", c.fold_ids, "write each row's test fold (0-based, one per line) to this file")
      ->check(tapegrad_cli::non_empty("a file path"));
  if (const auto rc = tapegrad_cli::parse(app, argc, argv, "tabular")) return *rc;  // 2: a refused option
  try {
    check_config(c);  // every option, before the data is read
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "tabular: %s\n", e.what());
    return 2;
  }

  try {
    const std::vector<std::int64_t> hidden = parse_hidden(c.hidden);
    const auto t0 = std::chrono::steady_clock::now();
    bool classification = false;
    const data::Dataset full = load(c, classification);
    const std::int64_t outputs = classification ? full.num_classes() : 1;
    if (classification && outputs < 2)
      throw std::invalid_argument("the label column holds one class only; classification needs at least 2");
    std::printf("%s: %lld rows, %lld features, %s%s\n", c.csv.c_str(), static_cast<long long>(full.size()),
                static_cast<long long>(full.num_features()), classification ? "classification, " : "regression",
                classification ? (std::to_string(outputs) + " classes").c_str() : "");

    const data::KFold kfold({.n_splits = c.folds, .shuffle = true, .seed = c.seed});
    const std::vector<data::Fold> folds = kfold.split(full.size());
    if (!c.fold_ids.empty()) {
      std::ofstream f(c.fold_ids);
      for (std::int64_t id : kfold.fold_ids(full.size())) f << id << '\n';
      if (!f.flush()) throw std::runtime_error("--fold-ids: cannot write '" + c.fold_ids + "'");
    }
    Generator gen(c.seed);
    const char* metric = classification ? "accuracy" : "R2";
    std::vector<double> scores;
    for (std::size_t k = 0; k < folds.size(); ++k) {
      const FoldResult r = run_fold(c, full, folds[k], classification, outputs, hidden, gen);
      scores.push_back(r.score);
      std::printf("fold %zu/%zu: %s %.4f  (%zu test rows, %d epochs, best %d, %.2f s)\n", k + 1, folds.size(), metric,
                  r.score, folds[k].test.size(), r.epochs, r.best_epoch, r.seconds);
      std::fflush(stdout);
    }
    double mean = 0, var = 0;
    for (double s : scores) mean += s;
    mean /= static_cast<double>(scores.size());
    for (double s : scores) var += (s - mean) * (s - mean);
    const double std_ = std::sqrt(var / static_cast<double>(scores.size()));
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("mean %s %.4f +- %.4f over %zu folds (std, ddof 0); time %.3f s\n", metric, mean, std_, scores.size(),
                secs);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tabular: %s\n", e.what());
    return 1;
  }
}
