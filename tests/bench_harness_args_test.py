"""bench/vs_onnxruntime.py refuses a corpus model name it does not know, for --corpus and
--load-models: a usage error (exit 2) naming the option, the unknown name and the corpus, before
any timing or model work starts (no ONNX Runtime or kiln build is needed to see it)."""
import os
import subprocess
import sys
import unittest

HARNESS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench", "vs_onnxruntime.py")


def run_harness(*args):
    return subprocess.run([sys.executable, HARNESS, "--build", "no-build", "--models", "no-models", *args],
                          capture_output=True, text=True, timeout=60)


class UnknownCorpusNames(unittest.TestCase):
    def test_corpus_names_the_unknown_model(self):
        r = run_harness("--part", "corpus", "--corpus", "vit_b_16,resnet50")
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("--corpus names no corpus model: resnet50 ", r.stderr)
        self.assertIn("resnet50-v1-12", r.stderr)  # the corpus' names, to pick from
        self.assertEqual(r.stdout, "")  # nothing measured

    def test_load_models_names_the_unknown_model(self):
        r = run_harness("--part", "load", "--load-models", "bert")
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("--load-models names no corpus model: bert ", r.stderr)
        self.assertEqual(r.stdout, "")


if __name__ == "__main__":
    unittest.main()
