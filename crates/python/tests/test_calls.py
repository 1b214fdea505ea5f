"""Durable calls: the behaviours Flink Agents' tests pin (durable_execute and its reconciler),
rewritten for this API, and the idempotency keys this store adds."""

from __future__ import annotations

import asyncio
import gc

import pytest

import actionstate
from actionstate import ArgsError, CallFailed, Event, Store, canonical_json, function_id, idempotency_key
from conftest import crashes, run




class Crash(Exception):
    """A crash, as far as the action is concerned: it ends the attempt with nothing completed."""


def module_function(x):
    return b"f"


class Tools:
    def method(self, x):
        return b"m"

    @staticmethod
    def static(x):
        return b"s"

    @classmethod
    def klass(cls, x):
        return b"c"


async def begin(store: Store, seq: int = 0, action: str = "act", key: str = "k"):
    round = store.round(key, seq, Event("input", {"n": seq}))
    return round, store.action(round, action)


def test_function_ids_name_functions_methods_static_and_class_methods_by_module_and_qualname():
    # Flink: test_durable_execution.py, function ids of functions, lambdas and methods.
    assert function_id(module_function) == "test_calls.module_function"
    assert function_id(Tools().method) == "test_calls.Tools.method"
    assert function_id(Tools.static) == "test_calls.Tools.static"
    assert function_id(Tools.klass) == "test_calls.Tools.klass"
    assert function_id(lambda: None) == "test_calls.test_function_ids_name_functions_methods_static_and_class_methods_by_module_and_qualname.<locals>.<lambda>"


def test_argument_encoding_is_stable_order_sensitive_and_tells_args_from_kwargs():
    # Flink: digest stability, order sensitivity, args versus kwargs.
    assert canonical_json([[1, "a"], {"b": 2, "a": 1}]) == canonical_json([[1, "a"], {"a": 1, "b": 2}])
    assert canonical_json([[1, 2], {}]) != canonical_json([[2, 1], {}])
    assert canonical_json([["x"], {}]) != canonical_json([[], {"x": "x"}])
    assert canonical_json({"a": [1.5, None, True]}) == '{"a":[1.5,null,true]}'


def test_arguments_without_a_canonical_encoding_are_refused_before_anything_is_written():
    ran = []

    async def scenario():
        store = await Store.open("memory")
        round, action = await begin(store)
        async with action as act:
            for bad in [object(), {1: "a"}, float("nan"), b"bytes"]:
                with pytest.raises(ArgsError) as raised:
                    await act.call(lambda x: ran.append(x) or b"", bad)
                assert not raised.value.retryable
            # With a digest of its own the same call is made.
            out = await act.call(lambda x: ran.append("digest") or b"ok", b"bytes", digest=bytes(32))
            assert out == b"ok"
        round.finish()

    run(scenario())
    assert ran == ["digest"]


def test_a_durable_call_is_replayed_after_a_restart_and_its_function_is_not_called_again(tmp_path):
    # Flink: testDurableExecuteSyncAction / RecoveryFromCachedResult (supplier called once).
    url = f"file:{tmp_path / 'log'}"
    calls = []

    def supplier(x):
        calls.append(x)
        return f"v{x}".encode()

    async def attempt(crash: bool):
        store = await Store.open(url)
        round, action = await begin(store)
        async with action as act:
            first = await act.call(supplier, 1)
            second = await act.call(supplier, 2)
            if crash:
                raise Crash
        round.finish()
        return first, second, act.last_source

    assert crashes(attempt(crash=True), Crash)
    assert run(attempt(crash=False)) == (b"v1", b"v2", "journal")
    assert calls == [1, 2]


def test_an_error_outcome_is_journaled_and_raised_again_on_replay(tmp_path):
    # Flink: ExceptionHandling / ExceptionRecovery (the failure survives, the call does not rerun).
    url = f"file:{tmp_path / 'log'}"
    calls = []

    async def failing():
        calls.append(1)
        raise CallFailed(b"quota exceeded")

    async def attempt(crash: bool):
        store = await Store.open(url)
        round, action = await begin(store)
        async with action as act:
            with pytest.raises(CallFailed) as failed:
                await act.call(failing)
            if crash:
                raise Crash
        round.finish()
        return failed.value.payload

    assert crashes(attempt(crash=True), Crash)
    assert run(attempt(crash=False)) == b"quota exceeded"
    assert calls == [1]


def test_any_other_exception_journals_nothing_and_the_call_runs_again_under_the_same_key():
    keys = []

    async def flaky():
        keys.append(idempotency_key())
        if len(keys) == 1:
            raise ConnectionError("reset")
        return b"done"

    async def scenario():
        store = await Store.open("memory")
        round, action = await begin(store)
        with pytest.raises(ConnectionError):
            async with action as act:
                await act.call(flaky)
        # Nothing was journaled and the action stayed incomplete: its next attempt calls again.
        async with store.action(round, "act") as act:
            assert not act.reused
            assert await act.call(flaky) == b"done"
            assert act.last_source == "executed"
        round.finish()

    run(scenario())
    assert len(keys) == 2 and keys[0] == keys[1], keys


def test_a_changed_argument_is_a_different_history_and_the_call_runs(tmp_path):
    # Flink: ReconcilableRecoveryMismatchStartsNewCall; a journal slot that does not match is truncated.
    url = f"file:{tmp_path / 'log'}"
    calls = []

    async def attempt(arg, crash):
        store = await Store.open(url)
        round, action = await begin(store)
        async with action as act:
            out = await act.call(lambda a: calls.append(a) or a.encode(), arg, name="tool")
            source = act.last_source
            if crash:
                raise Crash
        round.finish()
        return out, source

    assert crashes(attempt("a", True), Crash)
    assert run(attempt("b", False)) == (b"b", "executed")
    assert calls == ["a", "b"]


def test_a_call_left_pending_is_settled_by_the_reconciler_not_by_running_it_again(tmp_path):
    # Flink: ReconcilableRecoverySuccess (the reconciler runs once, the call never again).
    url = f"file:{tmp_path / 'log'}"
    effects: dict[str, int] = {}
    asked = []

    def charge(amount):
        effects[idempotency_key()] = amount
        raise Crash("crash after the side effect, before its result is durable")

    def reconcile():
        asked.append(idempotency_key())
        return b"charged" if idempotency_key() in effects else b"not charged"

    async def attempt():
        store = await Store.open(url)
        round, action = await begin(store)
        async with action as act:
            out = await act.call(charge, 42, reconcile=reconcile)
            source = act.last_source
        round.finish()
        return out, source

    assert crashes(attempt(), Crash)
    assert run(attempt()) == (b"charged", "reconciled")
    assert list(effects.values()) == [42]
    assert asked == list(effects)


def test_a_reconciler_failure_is_the_calls_error_outcome(tmp_path):
    # Flink: ReconcilableRecoveryException (the reconciler's failure is persisted).
    url = f"file:{tmp_path / 'log'}"

    def crash():
        raise Crash("crash")

    def reconcile():
        raise CallFailed(b"unknown")

    async def attempt():
        store = await Store.open(url)
        round, action = await begin(store)
        async with action as act:
            with pytest.raises(CallFailed) as failed:
                await act.call(crash, reconcile=reconcile)
            source = act.last_source
        round.finish()
        return failed.value.payload, source

    assert crashes(attempt(), Crash)
    assert run(attempt()) == (b"unknown", "reconciled")


def test_completion_only_and_reconcilable_calls_mix_in_one_journal(tmp_path):
    # Flink: RecoveryMixedCompletionOnlyAndReconcilableCalls.
    url = f"file:{tmp_path / 'log'}"
    ran = []

    async def attempt(crash):
        store = await Store.open(url)
        round, action = await begin(store)
        async with action as act:
            a = await act.call(lambda: ran.append("a") or b"a", name="a")
            b = await act.call(lambda: ran.append("b") or b"b", name="b", reconcile=lambda: b"b?")
            c = await act.call_json(lambda: ran.append("c") or {"c": 3}, name="c")
            if crash:
                raise Crash
        round.finish()
        return a, b, c

    assert crashes(attempt(True), Crash)
    assert run(attempt(False)) == (b"a", b"b", {"c": 3})
    assert ran == ["a", "b", "c"]


def test_async_functions_and_reconcilers_are_awaited_and_their_keys_differ_per_call():
    keys = []

    async def call(n):
        await asyncio.sleep(0)
        keys.append(idempotency_key())
        return str(n).encode()

    async def scenario():
        store = await Store.open("memory")
        round, action = await begin(store)
        async with action as act:
            assert [await act.call(call, n) for n in range(3)] == [b"0", b"1", b"2"]
        round.finish()

    run(scenario())
    assert len(set(keys)) == 3


def test_a_call_must_return_bytes_and_a_wrong_type_journals_nothing():
    async def scenario():
        store = await Store.open("memory")
        round, action = await begin(store)
        async with action as act:
            with pytest.raises(TypeError):
                await act.call(lambda: "not bytes", name="f")
            assert await act.call(lambda: b"bytes", name="f") == b"bytes"
            assert act.last_source == "executed"
        round.finish()

    run(scenario())


def test_idempotency_key_outside_a_call_is_a_clear_error():
    with pytest.raises(actionstate.HandleError):
        idempotency_key()


def test_a_reconciler_that_is_not_callable_is_refused_before_the_call():
    # Flink: reconciler validation (a non-callable reconciler is refused).
    ran = []

    async def scenario():
        store = await Store.open("memory")
        round, action = await begin(store)
        async with action as act:
            with pytest.raises(TypeError, match="reconcile must be callable"):
                await act.call(lambda: ran.append(1) or b"", name="f", reconcile="not callable")
        round.finish()

    run(scenario())
    assert ran == []


def test_restoring_an_earlier_checkpoint_keeps_the_durable_results_after_it(tmp_path):
    # Flink: testEarlierCheckpointReplayKeepsDurableState (the supplier is not called again).
    url = f"file:{tmp_path / 'log'}"
    calls = []

    async def history():
        store = await Store.open(url)
        ids = []
        for n in range(2):
            with store.round("k", n, Event("input", {"n": n})) as round:
                async with store.action(round, "act") as act:
                    await act.call(lambda n=n: calls.append(n) or b"r", name="supplier")
            ids.append(await store.checkpoint(b""))
        return ids

    async def replay(checkpoint):
        store = await Store.open(url, checkpoint=checkpoint)
        with store.round("k", 1, Event("input", {"n": 1})) as round:
            async with store.action(round, "act") as act:
                return act.reused

    ids = run(history())
    assert run(replay(ids[0])), "round 1, completed after checkpoint 1, is reused when it is restored"
    assert calls == [0, 1]
