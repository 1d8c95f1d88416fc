"""A controlled background load for the benchmarks: N busy-loop processes (issue 19's condition
for "threads under load" is one per core).

    with BusyLoops(n):
        ...  # timings here run against n spinning processes

The loops are stopped when the block ends, also on an exception, Ctrl-C (KeyboardInterrupt) or
SIGTERM (turned into SystemExit while the block runs), and by an atexit hook as a last resort.
Each loop is `sh -c 'while :; do :; done'` in its own process group, killed by its pid.
"""
import atexit
import os
import signal
import subprocess
import sys


class BusyLoops:
    def __init__(self, count):
        self.count = count
        self.procs = []
        self.old_sigterm = None

    def __enter__(self):
        atexit.register(self.stop)
        self.old_sigterm = signal.signal(signal.SIGTERM, self._on_sigterm)
        for _ in range(self.count):
            self.procs.append(subprocess.Popen(["sh", "-c", "while :; do :; done"],
                                               stdin=subprocess.DEVNULL, start_new_session=True))
        return self

    def __exit__(self, *exc):
        self.stop()
        if self.old_sigterm is not None:
            signal.signal(signal.SIGTERM, self.old_sigterm)
            self.old_sigterm = None
        return False

    @staticmethod
    def _on_sigterm(signum, frame):
        sys.exit(128 + signum)

    def stop(self):
        for p in self.procs:
            if p.poll() is None:
                try:
                    os.kill(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        for p in self.procs:
            p.wait()
        self.procs = []
