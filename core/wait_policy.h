#pragma once
// How OpenMP threads wait: tapegrad's programs make them sleep instead of spin.

namespace tapegrad {

/// Makes OpenMP threads sleep instead of spin while they wait, unless the user chose a
/// policy: when OMP_WAIT_POLICY is unset, sets it to "passive" and re-executes the program
/// (/proc/self/exe, same argv and environment plus that variable), because the OpenMP
/// runtime reads it only once, when it is loaded. Call it first thing in main(), before
/// any other work; it returns without doing anything when the variable is set, in a
/// setuid/setgid program, or when the exec fails. Why: libgomp's default spins ~300,000
/// times at every barrier, so with another busy process on a 2-core machine
/// train_fashion_mnist went from 1.7 s to 27 s per epoch.
void prefer_passive_wait_policy(char** argv);

}  // namespace tapegrad
