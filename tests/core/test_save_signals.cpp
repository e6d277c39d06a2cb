// A save interrupted by the user's signal leaves no temp file behind:
// SIGINT, SIGTERM and SIGHUP remove the temp files of saves in progress before the process
// dies of the signal, and the next save to a target removes temp files whose writer is gone.
// Each case runs the save in a child process (fork) and kills it mid-save.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <tapegrad/core/file_io.h>

#include "file_text_support.h"
#include "temp_dir_support.h"

using namespace tapegrad;
namespace fs = std::filesystem;

namespace {

using tapegrad::test::read_file;
using tapegrad::test::TempDir;

std::string names(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& n : v) out += n + " ";
  return out;
}

std::vector<std::string> temp_files(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().find(".tmp-") != std::string::npos) out.push_back(e.path().filename().string());
  return out;
}


// The signal's default action in the child (Catch2 installs its own handlers while a test
// runs; a program that handles the signal itself keeps its temp file, by design).
void default_actions() {
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
    struct sigaction sa {};
    sa.sa_handler = SIG_DFL;
    sigemptyset(&sa.sa_mask);
    ::sigaction(sig, &sa, nullptr);
  }
}

// Forks a child that takes the signals' default actions, runs body() and exits with status 0
// (unless body ends it first); the parent gets the child's pid.
template <class Body>
pid_t fork_child(Body&& body) {
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    default_actions();
    body();
    ::_exit(0);
  }
  return pid;
}

// waitpid's status of a child that must have died of `sig`.
void require_killed_by(pid_t pid, int sig) {
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == sig);
}

}  // namespace

TEST_CASE("a SIGTERM, SIGINT or SIGHUP during a save removes the temp file; the old file stays intact",
          "[file_io][reliability][signals]") {
  const int sig = GENERATE(SIGTERM, SIGINT, SIGHUP);
  TempDir dir;
  const fs::path target = dir.path / "model.safetensors";
  atomic_write_file(target.string(), std::string_view("old checkpoint"));
  const std::vector<std::uint8_t> big(20u << 20, 0x5A);  // 20 MB, the size of the temp files
  const pid_t pid = fork_child([&] {
    testing::raise_during_write(sig, std::size_t{8} << 20);  // the signal arrives after 8 MB
    try {
      atomic_write_file(target.string(), big.data(), big.size());
    } catch (...) {
    }
  });  // the child's exit is not reached when the signal ends the process
  require_killed_by(pid, sig);
  INFO("left: " << names(temp_files(dir.path)));
  CHECK(temp_files(dir.path).empty());
  CHECK(read_file(target.string()) == "old checkpoint");
}

TEST_CASE("a kill from outside while a child saves in a loop leaves no temp file",
          "[file_io][reliability][signals]") {
  TempDir dir;
  const fs::path target = dir.path / "loop.bin";
  const pid_t pid = fork_child([&] {
    const std::vector<std::uint8_t> big(16u << 20, 0x33);
    try {
      for (;;) atomic_write_file(target.string(), big.data(), big.size());
    } catch (...) {
      ::_exit(1);
    }
  });
  // Wait until a save is in progress (its temp file exists), then kill.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (temp_files(dir.path).empty() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  const bool caught_mid_save = !temp_files(dir.path).empty();
  ::kill(pid, SIGTERM);
  require_killed_by(pid, SIGTERM);
  CHECK(caught_mid_save);
  CHECK(temp_files(dir.path).empty());
  if (fs::exists(target)) CHECK(fs::file_size(target) == (16u << 20));  // a complete file, never a partial one
}

TEST_CASE("the next save removes temp files of the same target whose writer is gone, and only those",
          "[file_io][reliability][signals]") {
  TempDir dir;
  const fs::path target = dir.path / "ck.safetensors";
  // A pid that is certainly not alive: a child that has exited and been reaped.
  const pid_t dead = ::fork();
  REQUIRE(dead >= 0);
  if (dead == 0) ::_exit(0);
  int status = 0;
  REQUIRE(::waitpid(dead, &status, 0) == dead);
  auto touch = [&](const std::string& name) { std::ofstream(dir.path / name) << "partial"; };
  const std::string stale = ".ck.safetensors.tmp-" + std::to_string(dead) + "-7";
  const std::string live = ".ck.safetensors.tmp-" + std::to_string(::getppid()) + "-0";  // a running process
  const std::string other_target = ".other.bin.tmp-" + std::to_string(dead) + "-0";
  const std::string not_ours = ".ck.safetensors.tmp-notes";
  for (const auto& n : {stale, live, other_target, not_ours}) touch(n);

  atomic_write_file(target.string(), std::string_view("new"));
  CHECK_FALSE(fs::exists(dir.path / stale));
  CHECK(fs::exists(dir.path / live));
  CHECK(fs::exists(dir.path / other_target));
  CHECK(fs::exists(dir.path / not_ours));
  CHECK(read_file(target.string()) == "new");
}
