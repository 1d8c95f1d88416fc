#!/usr/bin/python3
"""Checks kiln's library boundaries: a file may include a kiln header only from its own library
or from a library its target declares (README "Building and layering").

Input: the target graph CMake writes at configure time (<build>/kiln_targets.json,
cmake/kiln_boundaries.cmake): every target with its type, source folder, sources and the targets
it links. A library owns the folders its sources are in (a header-only library: its CMake
folder), and every header (*.h) there is one of its files; a shared library built only from other
libraries' objects (no source file of its own, e.g. libkiln.so) owns no folder. A target sees its own headers and
those of the libraries it links, and of what they link PUBLIC/INTERFACE, transitively: exactly
what CMake's include directories would give it if each library published only its own folder.

Every `#include "kiln/<folder>/<file>"` (src/kiln/<folder>/<file>) and `#include
"tests/support/<file>"` in a target's sources, and in the headers of a library, must resolve to
a header of a library the target sees. Each one that does not is printed as

  src/kiln/triage/isolate.cc:12: #include "kiln/hal/cpu/step.h": kiln_triage does not declare
  kiln_hal_cpu (add it to the DEPS of kiln_triage in src/kiln/triage/CMakeLists.txt, or drop
  the include)

and the exit status is 1. Exit 0 when every include is declared, 2 on bad input.

  check_include_boundaries.py build/kiln_targets.json
"""

import json
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]((?:kiln|tests/support)/[^">]+)[">]')
LIBRARY_TYPES = {"STATIC_LIBRARY", "SHARED_LIBRARY", "OBJECT_LIBRARY", "INTERFACE_LIBRARY"}
HEADER_SUFFIXES = (".h", ".hpp")
SOURCE_SUFFIXES = (".c", ".cc", ".cpp", ".h", ".hpp")


def link_names(items, targets):
    """The kiln targets among CMake link items (imported and system libraries are left out)."""
    names = []
    for item in items:
        if item.startswith("$<LINK_ONLY:") and item.endswith(">"):
            item = item[len("$<LINK_ONLY:"):-1]
        if item in targets:
            names.append(item)
    return names


def visible_libraries(name, targets):
    """The target itself and the kiln libraries it links directly (what it declares)."""
    t = targets[name]
    return {name} | set(link_names(t["links"], targets)) | set(link_names(t["interface_links"], targets))


def library_folders(targets, root):
    """folder (relative to the source root) -> library that owns it."""
    owners = {}
    for name, t in targets.items():
        if t["type"] not in LIBRARY_TYPES:
            continue
        folders = {os.path.dirname(s) for s in t["sources"] if s.startswith(root + "/")}
        if not folders and t["type"] == "SHARED_LIBRARY":
            continue  # packages other libraries' objects; their folders are theirs
        if not folders:
            folders = {t["source_dir"]}
        for folder in folders:
            rel = os.path.relpath(folder, root)
            if rel in owners and owners[rel] != name:
                raise ValueError(f"folder {rel} has two libraries: {owners[rel]} and {name}")
            owners[rel] = name
    return owners


def include_owner(include, owners, root):
    """The library whose folder holds the included file, or None. A public header
    (include/kiln/kiln.h, included as "kiln/kiln.h") belongs to the library of include/."""
    if os.path.isfile(os.path.join(root, "include", include)):
        return owners.get("include")
    folder = os.path.dirname(include if include.startswith("tests/") else "src/" + include)
    return owners.get(folder)


def files_of(name, t, owners, root):
    """The files checked for a target: its sources, and a library's headers."""
    files = {s for s in t["sources"] if s.startswith(root + "/") and s.endswith(SOURCE_SUFFIXES)}
    for folder, owner in owners.items():
        if owner != name:
            continue
        path = os.path.join(root, folder)
        for entry in sorted(os.listdir(path)):
            if entry.endswith(HEADER_SUFFIXES):
                files.add(os.path.join(path, entry))
    return sorted(files)


def cmake_file_of(name, t, root):
    path = os.path.join(t["source_dir"], "CMakeLists.txt")
    return os.path.relpath(path, root)


def check(graph):
    """Returns the list of violation messages."""
    root = graph["source_root"]
    targets = graph["targets"]
    owners = library_folders(targets, root)
    problems = []
    for name in sorted(targets):
        t = targets[name]
        visible = visible_libraries(name, targets)
        for path in files_of(name, t, owners, root):
            try:
                with open(path, encoding="utf-8", errors="replace") as f:
                    lines = f.readlines()
            except OSError as e:
                problems.append(f"{os.path.relpath(path, root)}: cannot read ({e.strerror})")
                continue
            for number, line in enumerate(lines, 1):
                m = INCLUDE.match(line)
                if not m:
                    continue
                include = m.group(1)
                where = f"{os.path.relpath(path, root)}:{number}: #include \"{include}\""
                owner = include_owner(include, owners, root)
                if owner is None:
                    problems.append(f"{where}: no kiln library owns that folder")
                elif owner not in visible:
                    problems.append(
                        f"{where}: {name} does not declare {owner} (add it to the DEPS of {name} "
                        f"in {cmake_file_of(name, t, root)}, or drop the include)")
    return problems


def main(argv):
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    try:
        with open(argv[1], encoding="utf-8") as f:
            graph = json.load(f)
        problems = check(graph)
    except (OSError, ValueError, KeyError) as e:
        print(f"check_include_boundaries: {argv[1]}: {e}", file=sys.stderr)
        return 2
    for p in problems:
        print(p)
    libraries = sum(1 for t in graph["targets"].values() if t["type"] in LIBRARY_TYPES)
    if problems:
        print(f"FAIL: {len(problems)} include(s) of an undeclared library "
              f"({len(graph['targets'])} targets, {libraries} libraries)")
        return 1
    print(f"OK: every kiln include is declared ({len(graph['targets'])} targets, {libraries} libraries)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
