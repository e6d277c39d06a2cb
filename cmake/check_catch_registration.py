#!/usr/bin/env python3
"""The ctest test catch_registration: every Catch2 test case is run by ctest.

Usage: check_catch_registration.py <ctest> <build-dir> <executables-file>

<executables-file> lists the Catch2 test executables (cmake/tapegrad_catch_tests.cmake), one
path a line. For each, `<exe> --list-test-names-only` gives its test cases (hidden ones
aside). ctest's own view of the build (ctest --show-only=json-v1) gives the entries that run
it; each entry's arguments are given back to the executable with --list-test-names-only, so
Catch2 itself says which cases the entry runs. It fails when
  - an entry named as a test case of the executable runs anything but that one case,
  - any other entry running the executable runs no test case,
  - a test case is run by no entry, or the executable has fewer or more one-case entries
    than test cases while it has any,
naming the entries and test cases, and prints per executable the number of test cases and of
entries.
"""
import concurrent.futures
import json
import os
import subprocess
import sys


def list_names(exe, args, cwd):
    proc = subprocess.run([exe, *args, "--list-test-names-only"], cwd=cwd or None,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    # Catch2 exits with the number of test cases listed (at most 255)
    if proc.returncode < 0:
        raise RuntimeError(f"{exe} {args} --list-test-names-only: killed by signal {-proc.returncode}")
    names = []
    for line in proc.stdout.splitlines():
        if line.startswith('"#') and line.endswith('"'):
            line = line[1:-1]  # Catch2 quotes a name that starts with '#'
        if line:
            names.append(line)
    return names


def main():
    ctest, build_dir, exe_file = sys.argv[1:4]
    with open(exe_file) as f:
        executables = [line.strip() for line in f if line.strip()]
    shown = subprocess.run([ctest, "--show-only=json-v1", "--test-dir", build_dir],
                           stdout=subprocess.PIPE, check=True, text=True)
    tests = json.loads(shown.stdout)["tests"]

    problems = []
    missing_exes = [e for e in executables if not os.path.exists(e)]
    for e in missing_exes:
        problems.append(f"{e}: not built")
    executables = [e for e in executables if e not in missing_exes]

    entries = {e: [] for e in executables}  # exe -> [(entry name, args, working dir)]
    for t in tests:
        command = t.get("command") or []
        cwd = next((p["value"] for p in t.get("properties", []) if p["name"] == "WORKING_DIRECTORY"), None)
        for i, word in enumerate(command):
            if word in entries:
                entries[word].append((t["name"], command[i + 1:], cwd))
                break
        else:
            if t["name"].endswith("_NOT_BUILT"):
                problems.append(f"{t['name']}: its executable was not built, so its test cases are not registered")

    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        cases = dict(zip(executables, pool.map(lambda e: list_names(e, [], None), executables)))
        jobs = [(e, entry) for e in executables for entry in entries[e]]
        runs = list(pool.map(lambda job: list_names(job[0], job[1][1], job[1][2]), jobs))

    case_sets = {e: set(cases[e]) for e in executables}
    per_exe = {e: {"single": [], "group": [], "covered": set()} for e in executables}
    for (exe, (name, args, _)), ran in zip(jobs, runs):
        info = per_exe[exe]
        info["covered"].update(ran)
        if name in case_sets[exe]:
            info["single"].append(name)
            if ran != [name]:
                problems.append(f"ctest entry '{name}' of {os.path.basename(exe)} (arguments {args}) runs "
                                f"{len(ran)} test cases instead of that one: {ran}")
        else:
            info["group"].append(name)
            if not ran:
                problems.append(f"ctest entry '{name}' of {os.path.basename(exe)} (arguments {args}) "
                                f"runs no test case")

    for exe in executables:
        info = per_exe[exe]
        listed = cases[exe]
        base = os.path.basename(exe)
        print(f"{base}: {len(listed)} test cases; {len(info['single'])} one-case ctest entries, "
              f"{len(info['group'])} other entries")
        if not listed:
            problems.append(f"{base} lists no test case")
        uncovered = [n for n in listed if n not in info["covered"]]
        if uncovered:
            problems.append(f"{base}: {len(uncovered)} test case(s) run by no ctest entry: "
                            + "; ".join(f"'{n}'" for n in uncovered))
        if info["single"] and sorted(info["single"]) != sorted(listed):
            problems.append(f"{base}: {len(listed)} test cases but {len(info['single'])} one-case ctest entries")

    if problems:
        print(f"catch_registration: {len(problems)} problem(s):")
        for p in problems:
            print("  " + p)
        return 1
    print(f"catch_registration: every test case of the {len(executables)} Catch2 executables is run by ctest")
    return 0


if __name__ == "__main__":
    sys.exit(main())
