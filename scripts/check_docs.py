#!/usr/bin/env python3
"""Checks that README.md, docs/*.md and docs/results/*.md say true things about the tree.

  - each page has exactly one top-level heading ("# ...", outside code blocks);
  - every repository path it names (in `code` or a link, starting with a top-level folder
    of the tree, e.g. `layers/conv.h`, `tests/core/`) exists;
  - every test executable it names (`tests_<room>`, `<name>_tests`) is one the build makes,
    and every tag given to it ("[tag]") is a tag of that executable's test cases.
Paths with placeholders (<...>, *, {...}, ...) are patterns and are not checked. Prints one
line per problem and exits 1 when there is any. Usage: scripts/check_docs.py [repo root]
"""
import pathlib
import re
import sys

root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parent.parent)
pages = ([root / "README.md"] + sorted((root / "docs").glob("*.md")) +
         sorted((root / "docs" / "results").glob("*.md")))
folders = sorted(p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith(".") and
                 not p.name.startswith("build") and p.name not in ("results", "tools", "out"))
# generated or run-time folders a page may name although git does not hold them
generated = ("build", "build-", "results", "tools/onnxruntime")

# Test executables and the tags of their test cases. A library room tests/<room>/ builds
# tests_<room> (tests_golden from golden_runner/); a studies/examples folder with tests/
# builds <name>_tests.
executables = {}
def tags_of(files):
    tags = set()
    for f in files:
        for m in re.finditer(r'TEST_CASE\s*\(\s*"(?:[^"\\]|\\.)*"\s*,\s*"([^"]*)"', f.read_text(errors="replace")):
            tags.update(re.findall(r"\[([^\]]+)\]", m.group(1)))
    return tags
for room in sorted((root / "tests").iterdir()):
    if room.is_dir() and list(room.glob("*.cpp")) and not (room / "CMakeLists.txt").exists():
        name = "tests_golden" if room.name == "golden_runner" else "tests_" + room.name
        executables[name] = tags_of(room.glob("*.cpp"))
for cml in root.glob("*/*/CMakeLists.txt"):
    for m in re.finditer(r"add_executable\(\s*([A-Za-z0-9_]+_tests)\b", cml.read_text()):
        executables[m.group(1)] = tags_of(cml.parent.glob("tests/*.cpp"))
for cml in root.glob("tests/*/CMakeLists.txt"):
    for m in re.finditer(r"add_executable\(\s*([A-Za-z0-9_]+)\b", cml.read_text()):
        executables.setdefault(m.group(1), tags_of(cml.parent.glob("*.cpp")))

# Names ending in _tests that are CMake's, not executables: the functions and custom targets
# the tree's CMake files define, the modules of cmake/, and Catch2's catch_discover_tests.
cmake_names = {"catch_discover_tests"} | {f.stem for f in root.glob("cmake/*.cmake")}
for cml in [*root.glob("cmake/*.cmake"), *root.glob("**/CMakeLists.txt")]:
    if not any(part.startswith("build") for part in cml.relative_to(root).parts):
        cmake_names.update(re.findall(r"^\s*(?:function|macro|add_custom_target)\(\s*([A-Za-z0-9_]+)",
                                      cml.read_text(), re.M))

problems = []
path_re = re.compile(r"(?:`|\]\(|\()(?:\./)?((?:%s)/[^`)\s\"'#:,]*)" % "|".join(map(re.escape, folders)))
exe_re = re.compile(r"\b(tests_[a-z0-9_]+|[a-z0-9_]+_tests|tapegrad_tests)\b(?:\s+\"((?:\[[^\]]+\],?)+)\")?")
for page in pages:
    rel = page.relative_to(root)
    text = page.read_text()
    fence, tops = False, 0
    for line in text.splitlines():
        if line.startswith("```"):
            fence = not fence
        elif not fence and line.startswith("# "):
            tops += 1
    if tops != 1:
        problems.append(f"{rel}: {tops} top-level headings (expected 1)")
    for n, line in enumerate(text.splitlines(), 1):
        for m in path_re.finditer(line):
            p = m.group(1).rstrip(".")
            if any(c in p for c in "<>*{}…$") or "..." in p or p.startswith(generated):
                continue
            if not (root / p).exists() and not (page.parent / p).exists():
                problems.append(f"{rel}:{n}: names {p}, which does not exist")
        for m in exe_re.finditer(line):
            exe, tags = m.group(1), m.group(2)
            if exe == "tests_support" or exe in cmake_names:  # the tests' object library; CMake names
                continue
            if exe not in executables:
                problems.append(f"{rel}:{n}: names the test executable {exe}, which the build does not make")
                continue
            for tag in re.findall(r"\[([^\]]+)\]", tags or ""):
                if tag not in executables[exe] and not tag.startswith("."):
                    problems.append(f"{rel}:{n}: {exe} has no test case tagged [{tag}]")
for p in problems:
    print(p)
if problems:
    print(f"check_docs: {len(problems)} problem(s)")
    sys.exit(1)
print(f"check_docs: {len(pages)} pages, every path, heading and test name checked")
