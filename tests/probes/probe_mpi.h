// For the probes that need 3 MPI ranks (C38, C39): started without an MPI launcher, a probe
// runs itself under `mpirun -np 3` and returns that run's status, so a plain ./probe_C3x works
// like the other probes. MPIRUN overrides the launcher command (split on spaces; no shell).
// Under the launcher, three_ranks says whether there are the 3 ranks the probe needs.
#pragma once
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <tapegrad/distributed/environment.h>

extern char** environ;

namespace probe {

inline int relaunch_under_mpirun(const char* self) {
  const char* env = std::getenv("MPIRUN");
  std::vector<std::string> words;
  std::istringstream launcher(env ? env : "mpirun --allow-run-as-root --oversubscribe");
  for (std::string w; launcher >> w;) words.push_back(w);
  if (words.empty()) return 99;
  words.insert(words.end(), {"-np", "3", self});
  std::vector<char*> args;
  for (auto& w : words) args.push_back(w.data());
  args.push_back(nullptr);
  std::printf("launching: %s -np 3 %s\n", words.front().c_str(), self);
  std::fflush(stdout);
  pid_t pid = 0;
  if (posix_spawnp(&pid, args[0], nullptr, nullptr, args.data(), environ) != 0) return 99;
  int status = 0;
  if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status)) return 99;
  return WEXITSTATUS(status);
}

// True with 3 ranks; otherwise a FAIL line naming the probe `id` and the ranks it got.
inline bool three_ranks(const tapegrad::distributed::Environment& env, const char* id) {
  if (env.world_size() == 3) return true;
  std::printf("FAIL %s needs 3 ranks, got %d\n", id, env.world_size());
  return false;
}

}  // namespace probe
