// What fit() adds for a data-parallel run: the same data on every rank (checked once, at
// the start), each rank's rows of a batch, and the guard that turns one rank's exception
// into the end of the job rather than a hang.
#include <tapegrad/train/data_parallel.h>

#include <algorithm>
#include <exception>
#include <stdexcept>
#include <string>
#include <vector>

namespace tapegrad::train {

namespace {

// Collective: every rank's values (a sum of slots only their owner fills), compared with rank
// 0's; throws std::invalid_argument on every rank naming the first difference.
void check_same_values(DataParallel& par, const std::string& who, const std::vector<const char*>& names,
                       const std::vector<std::int64_t>& mine, std::string (*shown)(std::size_t, std::int64_t)) {
  const int world = par.world_size(), me = par.rank();
  const std::size_t K = mine.size();
  std::vector<std::int64_t> all(K * static_cast<std::size_t>(world), 0);
  for (std::size_t k = 0; k < K; ++k) all[static_cast<std::size_t>(me) * K + k] = mine[k];
  par.sum(all.data(), static_cast<std::int64_t>(all.size()));
  for (int r = 1; r < world; ++r)
    for (std::size_t k = 0; k < K; ++k) {
      const std::int64_t a = all[k], b = all[static_cast<std::size_t>(r) * K + k];
      if (a != b)
        throw std::invalid_argument(who + ": the ranks' data differ: rank 0 has " + names[k] + " " + shown(k, a) +
                                    ", rank " + std::to_string(r) + " has " + shown(k, b) +
                                    " (every rank must load the same data and batching: other batch counts would "
                                    "leave the ranks waiting for each other)");
    }
}

std::string shown_fit(std::size_t k, std::int64_t v) {
  if (k == 2) return v ? "true" : "false";
  if ((k == 3 || k == 4) && v < 0) return "none (no validation set)";
  return std::to_string(v);
}
std::string shown_plain(std::size_t, std::int64_t v) { return std::to_string(v); }

}  // namespace

void check_same_data(DataParallel& par, const data::DataLoader& loader, const data::Dataset* validation,
                     std::int64_t eval_batch_size) {
  const int world = par.world_size();
  const std::int64_t rows = loader.size(), batch = loader.options().batch_size;
  const bool drop_last = loader.options().drop_last;
  // what fixes the collectives of an epoch: the batch count and the validation batches
  check_same_values(par, "fit",
                    {"training rows", "batch_size", "drop_last", "validation rows", "eval_batch_size", "dataset samples"},
                    {rows, batch, drop_last ? 1 : 0, validation ? validation->size() : -1,
                     validation ? eval_batch_size : -1, loader.dataset_size()},
                    shown_fit);
  if (loader_gives_rank_share(par, loader)) return;  // whole batches per rank: nothing is split
  const std::int64_t last = rows % batch;
  if (!drop_last && last % world != 0)
    throw std::invalid_argument("fit: the last batch has " + std::to_string(last) + " rows (" + std::to_string(rows) +
                                " training rows, batch_size " + std::to_string(batch) + "), not divisible by the " +
                                std::to_string(world) +
                                " ranks: set drop_last = true, or use a training set whose last batch (rows % "
                                "batch_size) divides by the ranks");
}

void check_same_eval_data(DataParallel& par, const data::Dataset& ds, std::int64_t batch_size) {
  check_same_values(par, "evaluate", {"rows", "batch_size"}, {ds.size(), batch_size}, shown_plain);
}

bool loader_gives_rank_share(const DataParallel& par, const data::DataLoader& loader) {
  const data::Sampler& s = loader.sampler();
  if (s.num_replicas() == 1) return false;
  if (s.num_replicas() != par.world_size() || s.rank() != par.rank())
    throw std::invalid_argument("fit: the loader's sampler splits the data over " + std::to_string(s.num_replicas()) +
                                " replicas (rank " + std::to_string(s.rank()) + "), the run has " +
                                std::to_string(par.world_size()) + " ranks (this is rank " +
                                std::to_string(par.rank()) + ")");
  return true;
}

std::int64_t rows_per_rank(const data::DataLoader& loader, std::int64_t i, int world) {
  if (i < 0 || i >= loader.num_batches())
    throw std::out_of_range("rows_per_rank: batch " + std::to_string(i) + " outside [0, " +
                            std::to_string(loader.num_batches()) + ")");
  const std::int64_t b = loader.options().batch_size;
  const std::int64_t size = std::min(i * b + b, loader.size()) - i * b;
  return size / world;
}

void run_parallel_guarded(DataParallel* par, const std::function<void()>& body) {
  if (!par || par->world_size() <= 1) {
    body();
    return;
  }
  try {
    body();
  } catch (const std::exception& e) {
    par->abort(e.what());
    throw;
  } catch (...) {
    par->abort("unknown exception");
    throw;
  }
}

}  // namespace tapegrad::train
