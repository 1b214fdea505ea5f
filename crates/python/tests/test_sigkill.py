"""A SIGKILL campaign of a Python service: killed at random moments, at least 20 times, then
run to the end. Counted outside the process (by the effect service and from the service's
output): no input's effect is made under two keys (0 duplicate effects), and no input whose
completion was acknowledged runs again when it is replayed (0 lost acknowledged states)."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from conftest import ROOT

SERVICE = ROOT / "crates" / "python" / "tests" / "killed_service.py"
KILLS = 20


class Effects:
    """The external service: applies each idempotency key once."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.applied: dict[str, int] = {}
        self.requests = 0

    def handler(self):
        effects = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 (the standard library's name)
                seq = int(self.path.rsplit("/", 1)[1])
                key = self.headers["Idempotency-Key"]
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with effects.lock:
                    effects.requests += 1
                    effects.applied.setdefault(key, seq)
                body = f"receipt {seq}".encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        return Handler


def test_a_python_service_killed_20_times_makes_each_effect_once_and_loses_no_acknowledged_state(tmp_path):
    effects = Effects()
    server = ThreadingHTTPServer(("127.0.0.1", 0), effects.handler())
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    log = f"file:{tmp_path / 'log'}"
    rng = random.Random(7)
    acked: set[int] = set()
    lost: list[str] = []
    kills = runs = replayed = 0
    try:
        while True:
            runs += 1
            service = subprocess.Popen([sys.executable, str(SERVICE), log, url], stdout=subprocess.PIPE, text=True)
            lines: list[str] = []
            reader = threading.Thread(target=lambda: lines.extend(service.stdout), daemon=True)
            reader.start()
            if kills < KILLS:
                time.sleep(rng.uniform(0.2, 0.9))
                if service.poll() is None:
                    service.send_signal(signal.SIGKILL)
                    kills += 1
            service.wait(timeout=120)
            reader.join(timeout=10)
            for line in lines:
                word, *rest = line.split()
                if word == "RUN" and int(rest[0]) in acked:
                    replayed += 1
                    if rest[1] != "reused":
                        lost.append(f"run {runs}: input {rest[0]} was acknowledged, and ran again ({rest[1]})")
                if word == "ACK":
                    acked.add(int(rest[0]))
            finished = bool(lines) and lines[-1].strip() == "DONE"
            if finished:
                assert kills >= KILLS, f"the service finished all its inputs after only {kills} kills"
                assert service.returncode == 0
                break
            assert runs < 200, "the campaign makes no progress"
    finally:
        server.shutdown()
    keys_per_input = defaultdict(set)
    for key, seq in effects.applied.items():
        keys_per_input[seq].add(key)
    duplicates = {seq: keys for seq, keys in keys_per_input.items() if len(keys) > 1}
    print(
        f"sigkill campaign: {kills} kills over {runs} runs; {len(acked)} inputs acknowledged, {replayed} replayed; "
        f"{effects.requests} effect requests, {len(effects.applied)} applied; "
        f"{len(duplicates)} duplicate effects; {len(lost)} lost acknowledged states"
    )
    assert kills >= KILLS
    assert replayed > 0, "no acknowledged input was replayed: the check of lost states checked nothing"
    assert sorted(keys_per_input) == list(range(150)), "an input made no effect"
    assert not duplicates, duplicates
    assert not lost, lost
