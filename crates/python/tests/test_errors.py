"""Bad input gets a clear exception and writes nothing; a cancelled coroutine leaves its action
incomplete and the store usable."""

from __future__ import annotations

import asyncio

import pytest

import actionstate
from actionstate import ActionStateError, ConfigError, Event, HandleError, Store
from conftest import crashes, run


def test_exceptions_mirror_the_store_errors_with_retryable_and_kind():
    for name in ["LogError", "RebuildError", "ConfigError", "FencedError", "NotOwnedError", "CheckpointError",
                 "ArgsError", "HandleError", "WaitError", "Suspended"]:
        assert issubclass(getattr(actionstate, name), ActionStateError), name
    assert not issubclass(actionstate.CallFailed, ActionStateError), "a call's own error is no store error"


@pytest.mark.parametrize("url", ["nosuch://x", "file:", "kafka://", "memory:zero"])
def test_a_log_url_that_names_no_log_is_a_config_error_that_is_not_retryable(url):
    with pytest.raises(ConfigError) as raised:
        run(Store.open(url))
    assert not raised.value.retryable
    assert raised.value.kind in ("config", "bad_url")
    assert str(raised.value), "the message names what is wrong"


def test_a_checkpoint_that_is_not_in_the_log_is_a_checkpoint_error(file_url):
    async def scenario():
        store = await Store.open(file_url)
        await store.checkpoint(b"")

    run(scenario())
    with pytest.raises(actionstate.CheckpointError) as raised:
        run(Store.open(file_url, checkpoint=99))
    assert raised.value.kind == "checkpoint_not_found"


def test_attributes_that_are_no_values_are_refused_and_nothing_is_written(file_url):
    async def attempt(bad: bool):
        store = await Store.open(file_url)
        with pytest.raises(ValueError, match="attribute"):
            store.round("k", 0, Event("input", {"when": object()}))
        with store.round("k", 0, Event("input", {"n": 1})) as round:
            async with store.action(round, "act") as act:
                if act.reused:
                    return "reused"
                act.emit(Event("out", {"big": 2**70} if bad else {"ok": 1}))
                if bad:
                    with pytest.raises(ValueError, match="64 bits"):
                        await act.complete()
                    raise RuntimeError("give up")
        return "completed"

    assert crashes(attempt(bad=True), RuntimeError)
    # Nothing was completed: the action runs again rather than being reused.
    assert run(attempt(bad=False)) == "completed"
    assert run(attempt(bad=False)) == "reused"


def test_a_completed_action_refuses_more_work():
    async def scenario():
        store = await Store.open("memory")
        with store.round("k", 0, Event("input")) as round:
            async with store.action(round, "act") as act:
                pass
            with pytest.raises(HandleError):
                await act.call(lambda: b"", name="late")
            with pytest.raises(HandleError):
                act.emit(Event("late"))
            async with store.action(round, "act") as again:
                assert again.reused
                with pytest.raises(HandleError):
                    await again.call(lambda: b"", name="late")

    run(scenario())


def test_a_cancelled_call_leaves_the_action_incomplete_and_the_store_usable():
    started = []

    async def slow():
        started.append(actionstate.idempotency_key())
        await asyncio.sleep(3600)
        return b"never"

    async def scenario():
        store = await Store.open("memory")
        round = store.round("k", 0, Event("input"))
        act = store.action(round, "act")
        await act.__aenter__()
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(act.call(slow, name="slow"), 0.5)
        # The same action goes on: the cancelled call journaled nothing.
        assert await act.call(lambda: b"fast", name="fast") == b"fast"
        await act.__aexit__(None, None, None)
        round.finish()
        # Another action on another key, and the first one is now reused.
        with store.round("other", 0, Event("input")) as other:
            async with store.action(other, "act") as fresh:
                assert not fresh.reused
        with store.round("k", 0, Event("input")) as again:
            async with store.action(again, "act") as reused:
                assert reused.reused

    run(scenario())
    assert len(started) == 1


def test_a_cancelled_action_is_not_completed_and_runs_again():
    async def scenario():
        store = await Store.open("memory")
        blocker = asyncio.Event()

        async def action_body():
            with store.round("k", 0, Event("input")) as round:
                async with store.action(round, "act") as act:
                    await act.call(lambda: b"1", name="one")
                    await blocker.wait()

        task = asyncio.ensure_future(action_body())
        await asyncio.sleep(0.2)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        with store.round("k", 0, Event("input")) as round:
            async with store.action(round, "act") as act:
                assert act.resumed and not act.reused
                assert await act.call(lambda: b"x", name="one") == b"1"
                assert act.last_source == "journal"

    run(scenario())
