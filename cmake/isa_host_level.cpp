// Prints the build machine's ISA level (0 baseline, 1 avx2, 2 avx512) by core/isa.cpp's
// cpu_isa() rule, for cmake -DTAPEGRAD_ISA_UP_TO_HOST=ON.
#include <cstdio>

int main() {
  __builtin_cpu_init();
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("bmi") &&
                    __builtin_cpu_supports("bmi2") && __builtin_cpu_supports("f16c") && __builtin_cpu_supports("movbe");
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512cd") && __builtin_cpu_supports("avx512dq") &&
                      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx2") &&
                      __builtin_cpu_supports("fma") && __builtin_cpu_supports("bmi2");
  std::printf("%d\n", avx512 ? 2 : avx2 ? 1 : 0);
  return 0;
}
