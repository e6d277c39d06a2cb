// The DataLoader's worker threads: they build the epoch's batches in order into a bounded
// map (at most `capacity` batches handed out ahead of the caller), the caller takes them
// in order, and an exception met by a worker is handed over with its batch.
#include <tapegrad/data/dataloader.h>

#include <condition_variable>
#include <exception>
#include <map>
#include <mutex>
#include <thread>

namespace tapegrad::data {

struct DataLoader::Workers {
  struct Result {
    Batch batch;
    std::exception_ptr error;
  };
  std::mutex m;
  std::condition_variable cv;
  std::int64_t n = 0;         ///< batches in the epoch
  std::int64_t capacity = 1;  ///< bound on next - consumed
  std::int64_t next = 0;      ///< the next batch a worker starts
  std::int64_t consumed = 0;  ///< the next batch the caller takes
  bool stop = false;
  std::map<std::int64_t, Result> done;
  std::vector<std::thread> threads;

  void run(const DataLoader* loader) {
    for (;;) {
      std::int64_t k = 0;
      {
        std::unique_lock<std::mutex> lock(m);
        cv.wait(lock, [&] { return stop || next >= n || next < consumed + capacity; });
        if (stop || next >= n) return;
        k = next++;
      }
      Result r;
      try {
        r.batch = loader->build(k, 0, loader->batch_rows(k));
      } catch (...) {
        r.error = std::current_exception();
      }
      {
        std::lock_guard<std::mutex> lock(m);
        if (k >= consumed) done.emplace(k, std::move(r));  // else skipped by the caller
      }
      cv.notify_all();
    }
  }

  ~Workers() {
    {
      std::lock_guard<std::mutex> lock(m);
      stop = true;
    }
    cv.notify_all();
    for (std::thread& t : threads) t.join();
  }
};

DataLoader::~DataLoader() { stop_workers(); }

void DataLoader::stop_workers() const { workers_.reset(); }

void DataLoader::start_workers() {
  auto w = std::make_shared<Workers>();
  w->n = num_batches();
  w->capacity = options_.num_workers * options_.prefetch_factor;
  Workers* raw = w.get();
  workers_ = std::move(w);
  for (std::int64_t t = 0; t < options_.num_workers; ++t) raw->threads.emplace_back([raw, this] { raw->run(this); });
}

std::optional<Batch> DataLoader::take_prefetched(std::int64_t i) const {
  if (!workers_) return std::nullopt;
  Workers& w = *workers_;
  Workers::Result r;
  {
    std::unique_lock<std::mutex> lock(w.m);
    if (i < w.consumed) return std::nullopt;  // taken before: built again by the caller
    if (i > w.consumed) {                     // batches skipped: drop them, go on from i
      w.done.erase(w.done.begin(), w.done.lower_bound(i));
      w.consumed = i;
      if (w.next < i) w.next = i;
      w.cv.notify_all();
    }
    w.cv.wait(lock, [&] { return w.done.count(i) > 0; });
    auto it = w.done.find(i);
    r = std::move(it->second);
    w.done.erase(it);
    w.consumed = i + 1;
  }
  w.cv.notify_all();
  if (r.error) std::rethrow_exception(r.error);
  return std::move(r.batch);
}

}  // namespace tapegrad::data
