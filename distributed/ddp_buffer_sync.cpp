#include <tapegrad/distributed/ddp_buffer_sync.h>

#include <cstring>

#include <tapegrad/distributed/environment.h>

namespace tapegrad::distributed::detail {

BufferSync::BufferSync(layers::Module& module, MPI_Comm comm, CommSeconds& seconds)
    : module_(module), comm_(comm), seconds_(seconds) {}

void BufferSync::post() {
  deferred_ = false;
  buffers_ = module_.buffers();
  std::size_t total = 0;
  for (const auto& b : buffers_) total += b.nbytes();
  bytes_.resize(total);
  if (rank() == 0) {
    char* dst = bytes_.data();
    for (const auto& b : buffers_) {
      std::memcpy(dst, b.raw_data(), b.nbytes());
      dst += b.nbytes();
    }
  }
  {
    ScopedTimer t(seconds_.comm);
    check(MPI_Ibcast(bytes_.data(), static_cast<int>(total), MPI_BYTE, 0, comm_, &req_), "MPI_Ibcast");
  }
  in_flight_ = true;
}

void BufferSync::complete() {
  if (!in_flight_) return;
  {
    ScopedTimer t(seconds_.comm);
    wait(req_, "MPI_Ibcast");
  }
  in_flight_ = false;
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
  if (req_ != MPI_REQUEST_NULL) MPI_Wait(&req_, MPI_STATUS_IGNORE);
}

}  // namespace tapegrad::distributed::detail
