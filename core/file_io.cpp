#include <tapegrad/core/file_io.h>

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <stdexcept>
#include <vector>

namespace tapegrad {

namespace fs = std::filesystem;

namespace {

std::atomic<std::int64_t> g_fail_after{-1};
std::atomic<std::int64_t> g_signal_after{-1};
std::atomic<int> g_signal_to_raise{0};
std::atomic<std::uint64_t> g_counter{0};

// ---- temp files removed when a user's signal ends the process ---------------------------
// A fixed-size registry of the temp files being written (no allocation, so the signal
// handler may read it): slot state 0 free, 1 being filled, 2 holds a path.
constexpr int kTempSlots = 32;
constexpr std::size_t kTempPathMax = 4096;
struct TempSlot {
  std::atomic<int> state{0};
  char path[kTempPathMax];
};
TempSlot g_temp_slots[kTempSlots];
constexpr int kCleanupSignals[] = {SIGINT, SIGTERM, SIGHUP};
struct sigaction g_previous[3];

extern "C" void remove_temps_on_signal(int sig) {
  int k = 0;
  while (k < 3 && kCleanupSignals[k] != sig) ++k;
  if (k == 3) return;
  const struct sigaction& prev = g_previous[k];
  if (!(prev.sa_flags & SA_SIGINFO) && prev.sa_handler != SIG_DFL) {
    // The program handles this signal itself (e.g. "stop after this epoch"): the save goes
    // on, so its temp file stays; only pass the signal on.
    if (prev.sa_handler != SIG_IGN) prev.sa_handler(sig);
    return;
  }
  if (prev.sa_flags & SA_SIGINFO) {
    prev.sa_sigaction(sig, nullptr, nullptr);
    return;
  }
  // The default action ends the process: remove what it would leave behind (unlink is
  // async-signal-safe), then die of the same signal.
  for (auto& slot : g_temp_slots)
    if (slot.state.load(std::memory_order_acquire) == 2) ::unlink(slot.path);
  ::signal(sig, SIG_DFL);
  ::raise(sig);  // delivered when this handler returns (the signal is blocked in it)
}

// Puts the handler in place for the signals whose action is not ours already: the
// previous action (the default, or a program's handler, which is then chained) is kept
// for the handler; an ignored signal stays ignored. Checked at every save, so a handler a
// program installs later is chained from the next save on.
void install_signal_cleanup() {
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  for (int k = 0; k < 3; ++k) {
    struct sigaction cur {};
    if (::sigaction(kCleanupSignals[k], nullptr, &cur) != 0) continue;
    const bool siginfo = (cur.sa_flags & SA_SIGINFO) != 0;
    if (!siginfo && (cur.sa_handler == SIG_IGN || cur.sa_handler == remove_temps_on_signal)) continue;
    g_previous[k] = cur;
    struct sigaction sa {};
    sa.sa_handler = remove_temps_on_signal;
    sigemptyset(&sa.sa_mask);
    for (int sig : kCleanupSignals) sigaddset(&sa.sa_mask, sig);
    sa.sa_flags = SA_RESTART;
    ::sigaction(kCleanupSignals[k], &sa, nullptr);
  }
}

// Registers `path` for removal on a terminating signal; returns the slot (-1: all slots
// busy or the path too long, the file is then simply not covered).
int register_temp(const std::string& path) {
  install_signal_cleanup();
  if (path.size() >= kTempPathMax) return -1;
  for (int i = 0; i < kTempSlots; ++i) {
    int expected = 0;
    if (g_temp_slots[i].state.compare_exchange_strong(expected, 1, std::memory_order_acq_rel)) {
      std::memcpy(g_temp_slots[i].path, path.c_str(), path.size() + 1);
      g_temp_slots[i].state.store(2, std::memory_order_release);
      return i;
    }
  }
  return -1;
}

void unregister_temp(int slot) {
  if (slot >= 0) g_temp_slots[slot].state.store(0, std::memory_order_release);
}

std::string errno_text(int err) { return std::string(std::strerror(err)); }

const char* kind_of(mode_t m) {
  if (S_ISDIR(m)) return "a directory";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISFIFO(m)) return "a FIFO (named pipe)";
  if (S_ISSOCK(m)) return "a socket";
  if (S_ISLNK(m)) return "a symbolic link";
  if (S_ISREG(m)) return "a regular file";
  return "not a regular file";
}

fs::path folder_of(const fs::path& p) { return p.has_parent_path() ? p.parent_path() : fs::path("."); }

// The fs.protected_symlinks rule: a link in a sticky world-writable folder is followed
// only when it belongs to us or to the folder's owner.
void check_link_ownership(const std::string& shown, const fs::path& link, const struct stat& lst) {
  struct stat dst;
  if (::stat(folder_of(link).c_str(), &dst) != 0) return;
  const bool sticky_world = (dst.st_mode & S_ISVTX) && (dst.st_mode & S_IWOTH);
  if (sticky_world && lst.st_uid != ::geteuid() && lst.st_uid != dst.st_uid)
    throw std::runtime_error("cannot save '" + shown + "': '" + link.string() +
                             "' is a symbolic link owned by another user in the shared folder '" +
                             folder_of(link).string() + "'; refusing to follow it");
}

// Final target of `path` and its lstat (exists = false for a new path).
struct Target {
  std::string path;
  bool exists = false;
  struct stat st {};
};

Target resolve(const std::string& path) {
  if (path.empty()) throw std::runtime_error("cannot save: the output path is empty");
  fs::path p(path);
  for (int hop = 0; hop <= 40; ++hop) {
    Target t;
    t.path = p.string();
    if (::lstat(t.path.c_str(), &t.st) != 0) {
      const int err = errno;
      if (err == ENOENT) return t;  // a new file (or the missing target of a dangling link)
      if (err == ENOTDIR)
        throw std::runtime_error("cannot save '" + path + "': a folder in '" + t.path + "' is not a folder");
      throw std::runtime_error("cannot save '" + path + "': cannot inspect '" + t.path + "': " + errno_text(err));
    }
    t.exists = true;
    if (S_ISREG(t.st.st_mode)) return t;
    if (!S_ISLNK(t.st.st_mode)) {
      std::string msg = "cannot save '" + path + "': ";
      if (t.path != path) msg += "its link target '" + t.path + "' ";
      throw std::runtime_error(msg + "is " + kind_of(t.st.st_mode) + ", not a regular file; refusing to replace it");
    }
    check_link_ownership(path, p, t.st);
    std::vector<char> buf(static_cast<std::size_t>(std::max<off_t>(t.st.st_size, 255)) + 1);
    const ssize_t n = ::readlink(t.path.c_str(), buf.data(), buf.size() - 1);
    if (n < 0)
      throw std::runtime_error("cannot save '" + path + "': cannot read the link '" + t.path + "': " + errno_text(errno));
    const fs::path next(std::string(buf.data(), static_cast<std::size_t>(n)));
    p = next.is_absolute() ? next : folder_of(p) / next;
  }
  throw std::runtime_error("cannot save '" + path + "': too many levels of symbolic links");
}

// The start of every temp name for `target`: ".<file name>.tmp-" (the name cut to 200
// characters); the full name adds "<pid>-<n>".
std::string temp_prefix(const fs::path& target) {
  std::string name(1, '.');
  name += target.filename().string();
  if (name.size() > 200) name.resize(200);
  return name + ".tmp-";
}

bool all_digits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  return true;
}

// Removes temp files of earlier saves to `target` whose writer is gone (killed by a signal
// no handler could see, such as SIGKILL, or by a power cut): names ".<file>.tmp-<pid>-<n>"
// whose pid is not a live process. A live pid's file may be a save in progress: kept.
void remove_stale_temps(const fs::path& target) {
  const std::string prefix = temp_prefix(target);
  const fs::path dir = folder_of(target);
  DIR* d = ::opendir(dir.c_str());
  if (!d) return;
  std::vector<std::string> stale;
  while (const dirent* e = ::readdir(d)) {
    const std::string_view name(e->d_name);
    if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) continue;
    const std::string_view rest = name.substr(prefix.size());
    const auto dash = rest.find('-');
    if (dash == std::string_view::npos || !all_digits(rest.substr(0, dash)) || !all_digits(rest.substr(dash + 1)))
      continue;
    if (dash > 9) continue;  // not a pid
    const pid_t pid = static_cast<pid_t>(std::stol(std::string(rest.substr(0, dash))));
    if (pid <= 0 || pid == ::getpid()) continue;
    if (::kill(pid, 0) == 0 || errno != ESRCH) continue;  // alive (or not ours to probe): keep
    stale.emplace_back(name);
  }
  ::closedir(d);
  for (const auto& name : stale) ::unlink((dir / name).c_str());
}

// Creates an exclusive temp file next to `target`; returns its fd and fills `tmp`.
// `what` starts the error message ("cannot save 'x'"). With `slot`, the name is put in the
// signal registry before the file exists (a signal can never see the file unregistered);
// *slot is then the registry slot, released by the caller.
int make_temp(const std::string& what, const fs::path& target, std::string& tmp, int* slot = nullptr) {
  const fs::path dir = folder_of(target);
  int fd = -1;
  int err = 0;
  for (int attempt = 0; attempt < 100 && fd < 0; ++attempt) {
    const std::string name = temp_prefix(target) + std::to_string(::getpid()) + "-" + std::to_string(g_counter++);
    tmp = (dir / name).string();
    if (slot) *slot = register_temp(tmp);
    fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0666);
    err = errno;
    if (fd < 0 && slot) {
      unregister_temp(*slot);
      *slot = -1;
    }
    if (fd < 0 && err != EEXIST) break;
  }
  if (fd < 0) {
    std::string why = errno_text(err);
    struct stat st;
    if (err == ENOENT && ::stat(dir.c_str(), &st) != 0) why = "the folder does not exist";
    else if (err == ENOTDIR || (::stat(dir.c_str(), &st) == 0 && !S_ISDIR(st.st_mode))) why = "it is not a folder";
    throw std::runtime_error(what + ": cannot create a temp file in the folder '" + dir.string() +
                             "': " + why);
  }
  return fd;
}

}  // namespace

void testing::fail_writes_after(std::optional<std::size_t> bytes) {
  g_fail_after = bytes ? static_cast<std::int64_t>(*bytes) : -1;
}

void testing::raise_during_write(int sig, std::optional<std::size_t> bytes) {
  g_signal_to_raise = sig;
  g_signal_after = bytes ? static_cast<std::int64_t>(*bytes) : -1;
}

std::string resolve_output_file(const std::string& path) { return resolve(path).path; }

void check_output_file(const std::string& path) {
  const Target t = resolve(path);
  if (fs::path(t.path).filename().empty() || t.path.back() == '/')
    throw std::runtime_error("cannot save '" + path + "': the path names a folder, not a file");
  if (t.exists && ::access(t.path.c_str(), W_OK) != 0)
    throw std::runtime_error("cannot save '" + path + "': '" + t.path + "' is not writable: " + errno_text(errno));
  std::string tmp;
  const int fd = make_temp("cannot save '" + path + "'", t.path, tmp);
  ::close(fd);
  ::unlink(tmp.c_str());
}

void check_output_dir(const std::string& dir) {
  if (dir.empty()) throw std::runtime_error("cannot write into the output folder: the path is empty");
  std::error_code ec;
  fs::create_directories(dir, ec);
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0)
    throw std::runtime_error("cannot create the output folder '" + dir + "': " +
                             (ec ? ec.message() : errno_text(errno)));
  if (!S_ISDIR(st.st_mode))
    throw std::runtime_error("cannot write into the output folder '" + dir + "': it is " + kind_of(st.st_mode) +
                             ", not a folder");
  std::string tmp;
  const int fd = make_temp("cannot write into the output folder '" + dir + "'", fs::path(dir) / "probe", tmp);
  ::close(fd);
  ::unlink(tmp.c_str());
}

void atomic_write_file(const std::string& path, std::string_view text) {
  atomic_write_file(path, reinterpret_cast<const std::uint8_t*>(text.data()), text.size());
}

void atomic_write_file(const std::string& path, const std::uint8_t* bytes, std::size_t size) {
  const Target t = resolve(path);
  const fs::path target(t.path);
  if (target.filename().empty()) throw std::runtime_error("cannot save '" + path + "': the path names no file");
  if (t.exists && ::access(t.path.c_str(), W_OK) != 0)
    throw std::runtime_error("cannot save '" + path + "': '" + t.path + "' is not writable (mode " +
                             [&] {
                               char b[8];
                               std::snprintf(b, sizeof b, "%04o", static_cast<unsigned>(t.st.st_mode & 07777));
                               return std::string(b);
                             }() +
                             "): " + errno_text(errno));
  remove_stale_temps(target);
  std::string tmp;
  // Removed by a SIGINT / SIGTERM / SIGHUP that ends the process during the save.
  struct SlotGuard {
    int slot = -1;
    ~SlotGuard() { unregister_temp(slot); }
  } slot_guard;
  const int fd = make_temp("cannot save '" + path + "'", target, tmp, &slot_guard.slot);

  std::size_t written = 0;
  auto abort_with = [&](const std::string& what, int err) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw std::runtime_error("cannot save '" + path + "': " + what + " after " + std::to_string(written) + " of " +
                             std::to_string(size) + " bytes: " + errno_text(err) + "; the old file is unchanged");
  };
  if (t.exists) {
    // Keep the old file's permissions (and owner, when we may: root, or the same user).
    if (::fchown(fd, t.st.st_uid, t.st.st_gid) != 0) (void)::fchown(fd, static_cast<uid_t>(-1), t.st.st_gid);
    if (::fchmod(fd, t.st.st_mode & 07777) != 0) abort_with("setting the file mode failed", errno);
  }
  const std::int64_t limit = g_fail_after.load();
  const std::int64_t signal_at = g_signal_after.load();
  while (written < size) {
    std::size_t chunk = std::min<std::size_t>(size - written, std::size_t{1} << 30);
    if (signal_at >= 0) {
      if (written >= static_cast<std::size_t>(signal_at)) {
        g_signal_after = -1;
        ::raise(g_signal_to_raise.load());
      } else {
        chunk = std::min(chunk, static_cast<std::size_t>(signal_at) - written);
      }
    }
    if (limit >= 0) {
      if (written >= static_cast<std::size_t>(limit)) abort_with("write failed (simulated)", ENOSPC);
      chunk = std::min(chunk, static_cast<std::size_t>(limit) - written);
    }
    const ssize_t w = ::write(fd, bytes + written, chunk);
    if (w < 0) {
      if (errno == EINTR) continue;
      abort_with("write failed", errno);
    }
    written += static_cast<std::size_t>(w);
  }
  if (::fsync(fd) != 0) abort_with("fsync failed", errno);
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw std::runtime_error("cannot save '" + path + "': close failed: " + errno_text(err) +
                             "; the old file is unchanged");
  }
  if (::rename(tmp.c_str(), t.path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw std::runtime_error("cannot save '" + path + "': rename of the temp file failed: " + errno_text(err) +
                             "; the old file is unchanged");
  }
  // Make the rename itself durable.
  const int dfd = ::open(folder_of(target).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

}  // namespace tapegrad
