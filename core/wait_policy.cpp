#include <tapegrad/core/wait_policy.h>

#include <sys/auxv.h>
#include <unistd.h>

#include <cstdlib>

namespace tapegrad {

void prefer_passive_wait_policy(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr || argv == nullptr || argv[0] == nullptr) return;
  if (::getauxval(AT_SECURE) != 0) return;  // setuid/setgid: never re-execute
  if (::setenv("OMP_WAIT_POLICY", "passive", 0) != 0) return;
  ::execv("/proc/self/exe", argv);
  // exec failed (no /proc?): carry on with the runtime's default
}

}  // namespace tapegrad
