"""Sequential puts through Python against the same puts from Rust, in one run.

A put is what `actionstate bench` measures from Rust: an action of one key begun and
completed, its state about 300 bytes, one durable append each, after a restore. Here the
same through the Python package (`round` → `action` → `emit` → complete), then a durable
call's cost from Python: an action with one call (two puts: the journaled call, then the
completion) against an action without. Rust's figure comes from `actionstate bench --json`
(argv: the binary) on the same log URL form, run by this script between Python's rounds.

    python put.py ACTIONSTATE_BINARY LOG_URL_PREFIX [PUTS]

LOG_URL_PREFIX is `file:DIR` (a fresh subdirectory per round) or `kafka://HOST:PORT/TOPIC`
(a fresh topic per round, `?replication=1`). Prints one line per measurement and a JSON
summary last.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import subprocess
import sys
import time
import uuid

from actionstate import Event, Store

WARMUP = 50
ROUNDS = 3
PAYLOAD = "x" * 200  # with the key, ids and fingerprints: a state of about 300 bytes


def fresh(prefix: str, name: str) -> str:
    tag = f"{name}-{uuid.uuid4().hex[:8]}"
    if prefix.startswith("file:"):
        return f"{prefix.rstrip('/')}/{tag}"
    base, _, query = prefix.partition("?")
    return f"{base}-{tag}?{query or 'replication=1'}"


async def python_puts(url: str, puts: int, with_call: bool) -> list[float]:
    store = await Store.open(url)
    latencies = []
    for seq in range(WARMUP + puts):
        started = time.perf_counter()
        with store.round("bench", seq, Event("input", {"n": seq})) as round:
            async with store.action(round, "act") as act:
                if with_call:
                    await act.call(lambda: b"result", name="tool")
                act.emit(Event("output", {"payload": PAYLOAD}))
        if seq >= WARMUP:
            latencies.append(time.perf_counter() - started)
    return latencies


def rust_puts(binary: str, url: str, puts: int) -> dict:
    out = subprocess.run(
        [binary, "bench", "--log", url, "--puts", str(puts), "--records", "2000", "--json"],
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    binary, prefix = sys.argv[1], sys.argv[2]
    puts = int(sys.argv[3]) if len(sys.argv) > 3 else 2000
    rust_rate, python_rate, call_rate = [], [], []
    for r in range(ROUNDS):
        rust = rust_puts(binary, fresh(prefix, "rust"), puts)
        rust_rate.append(rust["puts_per_s"])
        plain = asyncio.run(python_puts(fresh(prefix, "py"), puts, with_call=False))
        python_rate.append(len(plain) / sum(plain))
        called = asyncio.run(python_puts(fresh(prefix, "pycall"), puts, with_call=True))
        call_rate.append(len(called) / sum(called))
        print(
            f"round {r}: rust {rust_rate[-1]:.0f} puts/s; python {python_rate[-1]:.0f} puts/s "
            f"(median {statistics.median(plain) * 1e6:.0f} µs); python with a durable call "
            f"{call_rate[-1]:.0f} actions/s (median {statistics.median(called) * 1e6:.0f} µs)",
            flush=True,
        )
    rust_per = 1 / statistics.median(rust_rate)
    python_per = 1 / statistics.median(python_rate)
    call_per = 1 / statistics.median(call_rate)
    summary = {
        "log": prefix,
        "puts": puts,
        "rounds": ROUNDS,
        "rust_puts_per_s": round(statistics.median(rust_rate)),
        "python_puts_per_s": round(statistics.median(python_rate)),
        "python_over_rust_time_per_put": round(python_per / rust_per, 3),
        "python_action_with_call_per_s": round(statistics.median(call_rate)),
        "durable_call_overhead_us": round((call_per - python_per) * 1e6),
    }
    print(json.dumps(summary))


main()
