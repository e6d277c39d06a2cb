#include <tapegrad/distributed/module_sync.h>

#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <vector>

#include <tapegrad/distributed/comm.h>
#include <tapegrad/distributed/environment.h>

namespace tapegrad::distributed {
namespace {

std::vector<std::string> lines_of(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream is(s);
  for (std::string l; std::getline(is, l);) out.push_back(l);
  return out;
}

}  // namespace

std::uint64_t fnv1a(const void* data, std::size_t n, std::uint64_t h) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 1099511628211ull;
  }
  return h;
}

std::uint64_t fnv1a(const std::string& s) { return fnv1a(s.data(), s.size()); }

std::string layout_description(const layers::Module& module) {
  std::ostringstream os;
  for (auto& [name, t] : module.named_parameters())
    os << "param " << name << " " << shape_str(t.shape()) << " " << dtype_name(t.dtype()) << "\n";
  for (auto& [name, t] : module.named_buffers())
    os << "buffer " << name << " " << shape_str(t.shape()) << " " << dtype_name(t.dtype()) << "\n";
  return os.str();
}

void check_same_across_ranks(std::uint64_t h, const std::function<std::string()>& describe,
                             const std::string& what) {
  if (!is_initialized() || world_size() == 1) return;
  // the hash travels in the header every collective on the world communicator starts with
  // (a rank in another collective throws on every rank there)
  const auto headers = detail::exchange_headers({detail::kStateCheck, 0, static_cast<std::int64_t>(h)});
  MPI_Comm comm = detail::world_comm();
  const int R = world_size();
  std::vector<std::uint64_t> hashes(static_cast<std::size_t>(R));
  for (int r = 0; r < R; ++r)
    hashes[static_cast<std::size_t>(r)] = static_cast<std::uint64_t>(headers[static_cast<std::size_t>(r)].tag);
  bool same = true;
  for (auto x : hashes) same = same && x == hashes[0];
  if (same) return;
  // Every rank saw the same hashes, so every rank takes this path: gather the texts.
  const std::string mine = describe();
  const int len = static_cast<int>(mine.size());
  std::vector<int> lens(static_cast<std::size_t>(R)), displs(static_cast<std::size_t>(R));
  detail::check(MPI_Allgather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, comm), "MPI_Allgather");
  int total = 0;
  for (int r = 0; r < R; ++r) {
    displs[static_cast<std::size_t>(r)] = total;
    total += lens[static_cast<std::size_t>(r)];
  }
  std::string all(static_cast<std::size_t>(total), '\0');
  detail::check(MPI_Allgatherv(mine.data(), len, MPI_CHAR, all.data(), lens.data(), displs.data(), MPI_CHAR, comm),
                "MPI_Allgatherv");
  const auto ref = lines_of(all.substr(0, static_cast<std::size_t>(lens[0])));
  for (int r = 1; r < R; ++r) {
    if (hashes[static_cast<std::size_t>(r)] == hashes[0]) continue;
    const auto other = lines_of(all.substr(static_cast<std::size_t>(displs[static_cast<std::size_t>(r)]),
                                           static_cast<std::size_t>(lens[static_cast<std::size_t>(r)])));
    std::size_t i = 0;
    while (i < ref.size() && i < other.size() && ref[i] == other[i]) ++i;
    const std::string a = i < ref.size() ? "'" + ref[i] + "'" : "<end: " + std::to_string(ref.size()) + " lines>";
    const std::string b =
        i < other.size() ? "'" + other[i] + "'" : "<end: " + std::to_string(other.size()) + " lines>";
    throw std::runtime_error(what + ": rank " + std::to_string(r) + " differs from rank 0 at line " +
                             std::to_string(i) + ": rank 0 has " + a + ", rank " + std::to_string(r) + " has " + b);
  }
  throw std::runtime_error(what + ": the hashes differ across ranks but the descriptions do not");
}

void check_same_layout(const layers::Module& module) {
  if (!is_initialized() || world_size() == 1) return;
  const std::string mine = layout_description(module);
  check_same_across_ranks(fnv1a(mine), [&] { return mine; },
                          "distributed: the model differs across ranks (parameters and buffers must match)");
}

void broadcast_state(layers::Module& module, int root) {
  if (!is_initialized() || world_size() == 1) return;
  if (root < 0 || root >= world_size())
    throw std::invalid_argument("broadcast_state: root " + std::to_string(root) + " outside [0, " +
                                std::to_string(world_size()) + ")");
  // the layout and the root (ranks naming other roots would each send, and copy nothing)
  const std::string mine = layout_description(module) + "broadcast root " + std::to_string(root) + "\n";
  check_same_across_ranks(fnv1a(mine), [&] { return mine; },
                          "broadcast_state: the model or the root differs across ranks (parameters, buffers and "
                          "root must match)");
  // every rank has the same layout now: the broadcasts below match in size
  MPI_Comm comm = detail::world_comm();
  auto send = [&](const Tensor& t) {
    detail::check(MPI_Bcast(t.raw_data(), static_cast<int>(t.nbytes()), MPI_BYTE, root, comm), "MPI_Bcast");
  };
  for (auto& t : module.parameters()) send(t);
  for (auto& t : module.buffers()) send(t);
}

}  // namespace tapegrad::distributed
