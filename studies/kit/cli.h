#pragma once
// A study's command line as a table of subcommands. Each subcommand is a description (its
// options, their check, its run) and the kit owns what they all share: the options --data,
// --out, --quick and -q/--quiet, the output folder's check before any run, the "wrote ..."
// line and the error message. Header-only: it needs CLI11, which study_kit does not link;
// include it from a study's executable, not from a study library.
//   StudyCli cli({"claims", "The chapter's claims", "(< 60 s)"}, commands(cli_quick(argc, argv)));
//   if (auto rc = cli.parse(argc, argv)) return *rc;
//   return cli.run();
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>
#include "cli_checks.h"
#include <spdlog/spdlog.h>

#include <tapegrad/core/file_io.h>
#include <tapegrad/data/fashion_mnist.h>
#include "kit/fashion_data.h"

namespace studies::kit {

/// The shared options' values, as a subcommand's run sees them.
struct CliContext {
  std::string data_dir = tapegrad::data::kFashionMnistDir;  ///< --data
  std::string out;     ///< --out, else the subcommand's default_out; checked writable before run
  bool quick = false;  ///< --quick
};

/// One subcommand of a study's command line.
struct Subcommand {
  std::string name, description;
  std::string default_out;  ///< the output folder when --out is not given
  bool data = true;         ///< takes --data (the Fashion-MNIST folder)
  /// Binds the subcommand's own options, before parsing.
  std::function<void(CLI::App&)> options;
  /// Optional, after parsing and before check: settles options that depend on what the command
  /// line gave (sc.count(flag)), e.g. --quick's settings for the flags not given.
  std::function<void(CLI::App&, const CliContext&)> prepare;
  /// Checks every option; throws std::invalid_argument naming it. Before --out is checked.
  std::function<void()> check;
  /// Reads the data, runs, writes into ctx.out and prints the summary to stdout. Returns the
  /// figures written; nullopt when this process writes nothing (an MPI rank other than 0).
  std::function<std::optional<std::vector<std::string>>(const CliContext&)> run;
};

/// The common shape of a subcommand: an options struct with --quick's defaults, one run that
/// makes a Result, its files and its summary. subcommand() turns it into a Subcommand.
template <class Options, class Result>
struct Study {
  std::string name, description, default_out;
  bool data = true;
  std::function<Options(Options)> quick;  ///< --quick's settings (applied before parsing)
  std::function<void(CLI::App&, Options&)> options;
  std::function<void(const Options&)> check;
  std::function<Result(const Options&, const CliContext&)> run;
  std::function<std::vector<std::string>(const Result&, const std::string& dir)> write;  ///< returns the figures
  std::function<std::string(const Result&)> summary;
};

/// A Study's run on Fashion-MNIST: the options' train_size and test_size images from --data
/// (load_data), then run(options, data).
template <class Options, class Result>
std::function<Result(const Options&, const CliContext&)> on_fashion(Result (*run)(const Options&, const StudyData&)) {
  return [run](const Options& o, const CliContext& ctx) {
    return run(o, load_data(ctx.data_dir, o.train_size, o.test_size));
  };
}

template <class Options, class Result>
Subcommand subcommand(Study<Options, Result> s, bool quick) {
  auto o = std::make_shared<Options>(quick && s.quick ? s.quick(Options{}) : Options{});
  Subcommand c{s.name, s.description, s.default_out, s.data, {}, {}, {}, {}};
  c.options = [o, bind = s.options](CLI::App& sc) { bind(sc, *o); };
  c.check = [o, check = s.check] { check(*o); };
  c.run = [o, s](const CliContext& ctx) -> std::optional<std::vector<std::string>> {
    const Result r = s.run(*o, ctx);
    std::vector<std::string> pngs = s.write(r, ctx.out);
    std::cout << s.summary(r);
    return pngs;
  };
  return c;
}

/// Refuses a sign on an unsigned option, and a value past 2^64 - 1 (examples/common/cli_checks.h).
using tapegrad_cli::non_negative;
/// --seeds (`seeds_help`) and --seed "First seed", refusing a sign.
inline void add_seed_options(CLI::App& sc, int& seeds, std::uint64_t& seed, const std::string& seeds_help = "Seeds") {
  sc.add_option("--seeds", seeds, seeds_help)->capture_default_str();
  sc.add_option("--seed", seed, "First seed")->capture_default_str()->check(non_negative());
}
/// --threads "Worker threads (each run single-threaded)".
inline void add_threads_option(CLI::App& sc, int& threads) {
  sc.add_option("--threads", threads, "Worker threads (each run single-threaded)")->capture_default_str();
}

/// A folder option given on the command line (e.g. --out): refuses an empty value,
/// "FLAG: expected a folder path, got ''".
inline void check_folder_option(std::string_view flag, const std::string& value) {
  if (value.empty()) throw std::invalid_argument(std::string(flag) + ": expected a folder path, got ''");
}

/// Whether --quick is among the arguments: a table built with it takes --quick's settings as
/// its defaults, so that options given explicitly win.
inline bool cli_quick(int argc, char** argv) {
  return std::any_of(argv + 1, argv + argc, [](const char* a) { return std::string_view(a) == "--quick"; });
}

/// A study's command line: name ("claims"), description, what --quick promises ("(< 60 s)").
struct CliSpec {
  std::string program, description, quick_time;
  /// Called with the message before it is printed when a run throws (MPI: abort the job).
  std::function<void(const std::string&)> on_error;
};

/// The table's command line: exactly one subcommand, run once.
class StudyCli {
 public:
  StudyCli(CliSpec spec, std::vector<Subcommand> table) : spec_(std::move(spec)), table_(std::move(table)) {
    app_ = std::make_unique<CLI::App>(spec_.description);
    app_->require_subcommand(1);
    for (auto& c : table_) {
      CLI::App* sc = app_->add_subcommand(c.name, c.description);
      if (c.options) c.options(*sc);
      if (c.data)
        sc->add_option("--data", ctx_.data_dir, "Fashion-MNIST directory (Debian: dataset-fashion-mnist)")->capture_default_str();
      sc->add_option("--out", ctx_.out, "Output directory (CSV, summary.md, PNG)");
      sc->add_flag("--quick", ctx_.quick,
                   "Small settings for a smoke test " + spec_.quick_time + "; options given explicitly are kept");
      sc->add_flag("-q,--quiet", quiet_, "Only warnings");
      apps_.push_back(sc);
    }
  }
  /// Parses; the exit code when parsing ends the program (--help, an error), else nullopt.
  std::optional<int> parse(int argc, char** argv) {
    try {
      app_->parse(argc, argv);
    } catch (const CLI::ParseError& e) {
      return app_->exit(e);
    }
    if (quiet_) spdlog::set_level(spdlog::level::warn);
    for (std::size_t k = 0; k < table_.size(); ++k)
      if (apps_[k]->parsed()) chosen_ = k;
    return std::nullopt;
  }
  /// The subcommand parsed (after parse()).
  const Subcommand& chosen() const { return table_[chosen_]; }
  /// prepare, check, the output folder (created, probed), run; prints "wrote ..." or the error
  /// ("PROGRAM: message"). Returns the exit code.
  int run() {
    Subcommand& c = table_[chosen_];
    try {
      const auto t0 = std::chrono::steady_clock::now();
      // --out "" would otherwise mean the default folder, silently: a path is required.
      if (apps_[chosen_]->count("--out") > 0) check_folder_option("--out", ctx_.out);
      if (c.prepare) c.prepare(*apps_[chosen_], ctx_);
      c.check();
      if (ctx_.out.empty()) ctx_.out = c.default_out;
      tapegrad::check_output_dir(ctx_.out);  // an unwritable folder fails now, not after the runs
      const auto pngs = c.run(ctx_);
      if (!pngs) return 0;
      const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::cout << "\nwrote " << ctx_.out << "/results.csv, " << ctx_.out << "/summary.md";
      for (const auto& p : *pngs) std::cout << ", " << p;
      std::cout << " (" << secs << " s)\n";
    } catch (const std::exception& e) {
      if (spec_.on_error) spec_.on_error(spec_.program + ": " + e.what());
      std::cerr << spec_.program << ": " << e.what() << "\n";
      return 1;
    }
    return 0;
  }

 private:
  CliSpec spec_;
  std::vector<Subcommand> table_;
  std::unique_ptr<CLI::App> app_;
  std::vector<CLI::App*> apps_;
  std::size_t chosen_ = 0;
  CliContext ctx_;
  bool quiet_ = false;
};

}  // namespace studies::kit
