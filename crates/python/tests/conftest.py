"""Fixtures of the Python package's tests: log URLs, and the servers they need.

A server test finds its server as the Rust tests do: ``KAFKA_BOOTSTRAP`` in the environment,
else ``target/services/kafka.env`` in the repository (``cargo xtask services up kafka``
writes it). Without one it prints the ``ACTIONSTATE-SKIP`` marker and skips, unless
``ACTIONSTATE_REQUIRE_SERVICES`` is set (``cargo xtask ci`` sets it): then it fails.
"""

from __future__ import annotations

import asyncio
import gc
import os
import pathlib
import sys
import uuid

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]
SKIP_MARKER = "ACTIONSTATE-SKIP"


def run(coroutine):
    """Runs a coroutine on a new event loop (the tests need no plugin). Then collects
    garbage: an exception caught in the coroutine can hold its store in a reference cycle,
    and the next attempt opens the same log, as a restarted process would."""
    try:
        return asyncio.run(coroutine)
    finally:
        gc.collect()


def service(name: str, prefix: str) -> dict | None:
    """The settings of service ``name``, or ``None`` when none is configured."""
    if os.environ.get(f"{prefix}_BOOTSTRAP"):
        return {k: v for k, v in os.environ.items() if k.startswith(prefix + "_")}
    env = ROOT / "target" / "services" / f"{name}.env"
    if not env.is_file():
        return None
    settings = {}
    for line in env.read_text().splitlines():
        key, sep, value = line.partition("=")
        if sep:
            settings[key.strip()] = value.strip()
    return settings if settings.get(f"{prefix}_BOOTSTRAP") else None


def skip_without(name: str, test: str) -> None:
    message = f"{SKIP_MARKER} {name} tests ({test}): no {name} service configured (run cargo xtask services up {name})"
    if os.environ.get("ACTIONSTATE_REQUIRE_SERVICES"):
        pytest.fail(f"{message}; ACTIONSTATE_REQUIRE_SERVICES is set")
    print(message)
    print(message, file=sys.stderr)
    pytest.skip(message)


@pytest.fixture
def file_url(tmp_path: pathlib.Path) -> str:
    """A fresh embedded log."""
    return f"file:{tmp_path / 'log'}"


@pytest.fixture
def kafka_url(request) -> str:
    """A fresh topic on the local Kafka broker."""
    settings = service("kafka", "KAFKA")
    if settings is None:
        skip_without("kafka", request.node.name)
    return f"kafka://{settings['KAFKA_BOOTSTRAP']}/py-{uuid.uuid4().hex[:12]}?partitions=4"


def crashes(coroutine, exception: type[BaseException]) -> bool:
    """Runs an attempt that ends in ``exception``, as a crash would end it. The exception is
    dropped here with the frames it holds, so that the attempt's store is closed, as a dead
    process's is, before the next attempt opens the log."""
    try:
        run(coroutine)
    except exception:
        crashed = True
    else:
        crashed = False
    gc.collect()
    return crashed


@pytest.fixture(autouse=True)
def reopen_waits_for_the_last_attempts_log(monkeypatch):
    """A test restarts a service in the same process: the next attempt opens the log the last
    one used. The embedded log is released when its last reference goes, which can be a
    moment after the last attempt returned (its committer finishes on a tokio blocking thread).
    A restarted process never sees that, so here an open that finds the log still held by this
    process tries again, for up to five seconds."""
    import actionstate

    original = actionstate.Store.open.__func__

    async def open_again(cls, url="file:./actionstate-data", **kwargs):
        deadline = asyncio.get_running_loop().time() + 5
        while True:
            try:
                return await original(cls, url, **kwargs)
            except actionstate.LogError as e:
                if "already open" not in str(e) or asyncio.get_running_loop().time() > deadline:
                    raise
                gc.collect()
                await asyncio.sleep(0.05)

    monkeypatch.setattr(actionstate.Store, "open", classmethod(open_again))
