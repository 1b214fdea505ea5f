"""`examples/python/agent.py` against the simulator's HTTP service: crashed after a tool's
effect, resumed, and the effect made once (the service deduplicates by the call's key)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT

AGENT = ROOT / "examples" / "python" / "agent.py"


def external_service() -> str:
    binary = os.environ.get("ACTIONSTATE_EXTERNAL_SERVICE") or str(ROOT / "target" / "debug" / "external-service")
    if not os.path.isfile(binary):
        message = f"no {binary}: build it with cargo build -p actionstate-examples --bin external-service"
        if os.environ.get("ACTIONSTATE_REQUIRE_SERVICES"):
            pytest.fail(message)
        pytest.skip(f"ACTIONSTATE-SKIP {message}")
    return binary


def test_a_crash_after_a_tools_effect_resumes_and_the_service_applies_it_once(tmp_path):
    service = subprocess.Popen([external_service()], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        url = service.stdout.readline().strip()

        def agent(*args):
            return subprocess.run([sys.executable, str(AGENT), url, *args], cwd=tmp_path, capture_output=True, text=True, timeout=120)

        crashed = agent("--crash")
        assert crashed.returncode == 3, crashed.stderr
        resumed = agent()
        assert resumed.returncode == 0, resumed.stderr
        assert resumed.stdout.splitlines() == ["ticket 0: refund (executed)", "ticket 1: track (executed)"]
        again = agent()
        assert again.stdout.splitlines() == ["ticket 0: answered before", "ticket 1: answered before"]
        service.stdin.write("report\n")
        service.stdin.flush()
        report = json.loads(service.stdout.readline())
    finally:
        service.stdin.close()
        service.wait(timeout=10)
    # The refund was asked for twice under one key, and made once.
    assert report["effects"] == 2 and report["deduplicated"] == 1 and report["duplicates"] == 0, report
