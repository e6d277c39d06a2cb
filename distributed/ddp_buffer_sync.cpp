#include <tapegrad/distributed/ddp_buffer_sync.h>

#include <cstring>
#include <sstream>
#include <string>

#include <tapegrad/distributed/environment.h>
#include <tapegrad/distributed/module_sync.h>

namespace tapegrad::distributed::detail {

BufferSync::BufferSync(layers::Module& module, MPI_Comm comm, CommSeconds& seconds)
    : module_(module), comm_(comm), seconds_(seconds) {}

void BufferSync::post() {
  // A deferred broadcast sends the byte count the step check agreed on before the forward; a
  // forward that registered or replaced buffers changed this rank's count since, so every
  // rank also sends its own count, and complete() compares them before any copy.
  const bool was_deferred = deferred_;
  deferred_ = false;
  buffers_ = module_.buffers();
  std::size_t total = 0;
  for (const auto& b : buffers_) total += b.nbytes();
  agreed_ = was_deferred ? checked_bytes_ : total;
  gather_ = was_deferred;
  bytes_.resize(agreed_);
  if (rank() == 0 && total == agreed_) {
    char* dst = bytes_.data();
    for (const auto& b : buffers_) {
      std::memcpy(dst, b.raw_data(), b.nbytes());
      dst += b.nbytes();
    }
  }
  {
    ScopedTimer t(seconds_.comm);
    if (gather_) {
      mine_ = total;
      counts_.assign(static_cast<std::size_t>(world_size()), 0);
      check(MPI_Iallgather(&mine_, 1, MPI_UINT64_T, counts_.data(), 1, MPI_UINT64_T, comm_, &gather_req_),
            "MPI_Iallgather");
    }
    check(MPI_Ibcast(bytes_.data(), static_cast<int>(agreed_), MPI_BYTE, 0, comm_, &req_), "MPI_Ibcast");
  }
  in_flight_ = true;
}

void BufferSync::complete() {
  if (!in_flight_) return;
  {
    ScopedTimer t(seconds_.comm);
    if (gather_) wait(gather_req_, "MPI_Iallgather");
    wait(req_, "MPI_Ibcast");
  }
  in_flight_ = false;
  if (gather_) {
    gather_ = false;
    bool agreed = true, equal = true;
    for (std::uint64_t c : counts_) {
      agreed = agreed && c == agreed_;
      equal = equal && c == counts_[0];
    }
    if (!agreed) {  // every rank saw the same counts: all take the same branch
      buffers_.clear();
      if (equal) {  // every rank's forward changed its buffers alike: send them as they are now
        post();
        complete();
        return;
      }
      std::ostringstream os;
      for (const auto& [name, b] : module_.named_buffers()) os << "buffer " << name << ": " << b.nbytes() << " bytes\n";
      os << "buffers: " << mine_ << " bytes in all\n";
      const std::string mine = os.str();
      check_same_across_ranks(fnv1a(mine), [&] { return mine; },
                              "DistributedDataParallel: the ranks' buffers differ after the forward (" +
                                  std::to_string(agreed_) +
                                  " bytes on every rank before it; every rank must register the same buffers, "
                                  "their names, shapes and dtypes), so rank 0's cannot be broadcast");
    }
  }
  if (rank() != 0) {
    const char* src = bytes_.data();
    for (auto& b : buffers_) {
      std::memcpy(b.raw_data(), src, b.nbytes());
      src += b.nbytes();
    }
  }
  buffers_.clear();
}

void BufferSync::drain() {
  if (gather_req_ != MPI_REQUEST_NULL) MPI_Wait(&gather_req_, MPI_STATUS_IGNORE);
  if (req_ != MPI_REQUEST_NULL) MPI_Wait(&req_, MPI_STATUS_IGNORE);
}

}  // namespace tapegrad::distributed::detail
