"""Crash-safe worker processes for the bench harnesses (bench/opinfo.py,
bench/tile_sweep.py): a worker is the harness script itself run with
--worker, reading one JSON request a line on stdin and answering JSON lines
on stdout; a worker killed by a signal is replaced, its stderr's last line
kept as the reason.  run_pool drains a list of items through JOBS workers."""
import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time


def worker_env():
    """The environment of a worker: the simulator, one host thread, fallbacks counted (not errors)."""
    env = dict(os.environ, NEURON_SIM="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", PYTHONWARNINGS="ignore")
    env.pop("NEURON_STRICT", None)
    env.pop("TORCH_DEVICE_BACKEND_AUTOLOAD", None)
    return env


class WorkerProcess:
    """SCRIPT --worker ARGS as a child process; start() waits for its
    {"ready": ...} line (retrying while the library may be being rebuilt)."""

    def __init__(self, script, args=(), name="worker"):
        self.script, self.args, self.name = str(script), list(args), name
        self.proc = None

    def start(self, attempts=3):
        why = ""
        for attempt in range(attempts):
            self.err = tempfile.TemporaryFile()
            self.proc = subprocess.Popen([sys.executable, self.script, "--worker", *self.args],
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.err,
                                         env=worker_env(), text=True, bufsize=1)
            self.lines = queue.Queue()
            threading.Thread(target=self._read, args=(self.proc.stdout, self.lines), daemon=True).start()
            msg = self.get(300)
            if isinstance(msg, dict) and "ready" in msg:
                return
            why = self.stderr_tail()
            self.stop()
            if attempt + 1 < attempts:
                # the library may be rebuilt under us: wait for it
                print(f"{self.name}: worker did not start ({why}); retrying in 60 s", file=sys.stderr)
                time.sleep(60)
        raise RuntimeError(f"{self.name}: worker does not start: {why}")

    @staticmethod
    def _read(stream, q):
        for line in stream:
            try:
                q.put(json.loads(line))
            except ValueError:
                pass
        q.put(None)

    def send(self, request):
        """a request to the worker; False when it is gone (a crash, reported by get)"""
        try:
            self.proc.stdin.write(json.dumps(request) + "\n")
            self.proc.stdin.flush()
            return True
        except BrokenPipeError:
            return False

    def get(self, timeout):
        """the next answer, None when the worker died, "timeout" after TIMEOUT seconds"""
        try:
            return self.lines.get(timeout=max(timeout, 0.01))
        except queue.Empty:
            return "timeout"

    def stderr_tail(self):
        self.err.seek(0)
        lines = [ln.strip() for ln in self.err.read().decode(errors="replace").splitlines() if ln.strip()]
        lines = [ln for ln in lines if "Warning" not in ln and not ln.startswith("warnings.warn")]
        return lines[-1][:300] if lines else ""

    def rss(self):
        try:
            with open(f"/proc/{self.proc.pid}/statm") as f:
                return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, ValueError, IndexError):
            return 0

    def stop(self):
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait()
            self.proc = None


def run_pool(items, make_worker, work, jobs=1, progress=None):
    """WORK(worker, item) for every item in JOBS threads, each with its own
    worker from MAKE_WORKER() (stopped at the end); the results in ITEMS'
    order (None where a thread died).  PROGRESS(index, result) after each."""
    todo = queue.Queue()
    for i, item in enumerate(items):
        todo.put((i, item))
    results = [None] * len(items)
    lock = threading.Lock()

    def loop():
        w = make_worker()
        try:
            while True:
                try:
                    i, item = todo.get_nowait()
                except queue.Empty:
                    return
                results[i] = work(w, item)
                if progress:
                    with lock:
                        progress(i, results[i])
        finally:
            w.stop()

    threads = [threading.Thread(target=loop) for _ in range(max(1, min(jobs, len(items))))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results
