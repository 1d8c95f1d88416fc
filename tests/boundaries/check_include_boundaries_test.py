#!/usr/bin/python3
"""Tests of check_include_boundaries.py on a small made-up tree: base <- shape <- app, and a
header-only hal."""

import json
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_include_boundaries as cib  # noqa: E402


class CheckTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.root = self.tmp.name
        self.targets = {}

    def tearDown(self):
        self.tmp.cleanup()

    def write(self, rel, text):
        path = os.path.join(self.root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)
        return path

    def target(self, name, type_, folder, sources, links=(), interface=None):
        self.targets[name] = {
            "type": type_, "source_dir": os.path.join(self.root, folder),
            "links": list(links),
            "interface_links": list(links if interface is None else interface),
            "sources": [os.path.join(self.root, folder, s) for s in sources]}

    def tree(self):
        self.write("src/kiln/base/status.h", "#pragma once\n")
        self.write("src/kiln/base/status.cc", '#include "kiln/base/status.h"\n')
        self.write("src/kiln/shape/shape.h", '#pragma once\n#include "kiln/base/status.h"\n')
        self.write("src/kiln/shape/shape.cc", '#include "kiln/shape/shape.h"\n')
        self.write("src/kiln/hal/device.h", '#pragma once\n#include "kiln/base/status.h"\n')
        self.target("kiln_base", "STATIC_LIBRARY", "src/kiln/base", ["status.cc"], ["fmt::fmt"])
        self.target("kiln_shape", "STATIC_LIBRARY", "src/kiln/shape", ["shape.cc"], ["kiln_base"])
        self.target("kiln_hal", "INTERFACE_LIBRARY", "src/kiln/hal", [], [], ["kiln_base"])

    def run_check(self):
        return cib.check({"source_root": self.root, "targets": self.targets})

    def test_declared_includes_pass(self):
        self.tree()
        self.write("tools/app.cc", '#include "kiln/shape/shape.h"\n#include <vector>\n')
        self.target("app", "EXECUTABLE", "tools", ["app.cc"], ["kiln_shape"], [])
        self.assertEqual(self.run_check(), [])

    def test_undeclared_include_names_file_include_and_missing_library(self):
        self.tree()
        self.write("tools/app.cc", '#include "kiln/shape/shape.h"\n  #  include "kiln/hal/device.h"\n')
        self.target("app", "EXECUTABLE", "tools", ["app.cc"], ["kiln_shape"], [])
        problems = self.run_check()
        self.assertEqual(len(problems), 1, problems)
        self.assertIn('tools/app.cc:2: #include "kiln/hal/device.h": app does not declare kiln_hal',
                      problems[0])
        self.assertIn("tools/CMakeLists.txt", problems[0])

    def test_a_library_reached_only_through_another_is_not_declared(self):
        self.tree()
        self.write("tools/app.cc", '#include "kiln/base/status.h"\n')
        self.target("app", "EXECUTABLE", "tools", ["app.cc"], ["kiln_shape"], [])
        problems = self.run_check()
        self.assertEqual(len(problems), 1, problems)
        self.assertIn("app does not declare kiln_base", problems[0])

    def test_headers_of_a_header_only_library_are_checked(self):
        self.tree()
        self.write("src/kiln/hal/buffer.h", '#pragma once\n#include "kiln/shape/shape.h"\n')
        problems = self.run_check()
        self.assertEqual(len(problems), 1, problems)
        self.assertIn('src/kiln/hal/buffer.h:2: #include "kiln/shape/shape.h": kiln_hal does not '
                      "declare kiln_shape", problems[0])

    def test_a_shared_library_of_other_objects_owns_no_folder(self):
        self.tree()
        self.write("src/kiln/api/api.cc", '#include "kiln/shape/shape.h"\n')
        self.target("kiln_api", "OBJECT_LIBRARY", "src/kiln/api", ["api.cc"], ["kiln_shape"])
        self.target("libapi", "SHARED_LIBRARY", "src/kiln/api", [], ["kiln_api"])
        self.targets["libapi"]["sources"] = ["$<TARGET_OBJECTS:kiln_api>"]
        self.assertEqual(self.run_check(), [])
        # A shared library with a source of its own owns that folder like any library.
        self.target("libapi", "SHARED_LIBRARY", "src/kiln/api", ["api.cc"], ["kiln_api"])
        with self.assertRaisesRegex(ValueError, "two libraries"):
            self.run_check()

    def test_public_headers_belong_to_the_library_of_include(self):
        self.tree()
        self.write("include/kiln/kiln.h", "#pragma once\n")
        self.target("kiln_headers", "INTERFACE_LIBRARY", "include", [], [])
        self.write("tools/embed.c", '#include "kiln/kiln.h"\n')
        self.target("embed", "EXECUTABLE", "tools", ["embed.c"], [], [])
        problems = self.run_check()
        self.assertEqual(len(problems), 1, problems)
        self.assertIn("embed does not declare kiln_headers", problems[0])
        self.target("embed", "EXECUTABLE", "tools", ["embed.c"], ["kiln_headers"], [])
        self.assertEqual(self.run_check(), [])

    def test_a_folder_without_a_library_is_reported(self):
        self.tree()
        self.write("src/kiln/shape/dims.h", '#include "kiln/nowhere/x.h"\n')
        problems = self.run_check()
        self.assertEqual(len(problems), 1, problems)
        self.assertIn("no kiln library owns that folder", problems[0])

    def test_main_exit_codes(self):
        self.tree()
        graph = self.write("graph.json", "")
        with open(graph, "w") as f:
            json.dump({"source_root": self.root, "targets": self.targets}, f)
        self.assertEqual(cib.main(["check", graph]), 0)
        self.write("src/kiln/base/bad.h", '#include "kiln/shape/shape.h"\n')
        self.assertEqual(cib.main(["check", graph]), 1)
        self.assertEqual(cib.main(["check", graph + ".missing"]), 2)


if __name__ == "__main__":
    unittest.main()
