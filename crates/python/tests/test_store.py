"""Reuse, resume and divergence, on the embedded store (across restores) and in memory."""

from __future__ import annotations

import pytest

from actionstate import Event, Store
from conftest import run


class Model:
    """A stand-in for a model: counts the calls that really ran."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    async def ask(self, question: str) -> bytes:
        self.calls.append(question)
        return f"answer to {question}".encode()


async def answer(store: Store, model: Model, key: str, seq: int, text: str, crash_after_call: bool = False) -> object:
    """One round of one action: reuse it, or ask the model and complete."""
    with store.round(key, seq, Event("question", {"text": text})) as round:
        async with store.action(round, "answer") as action:
            if action.reused:
                return ("reused", action.outputs[0].attributes["reply"])
            reply = await action.call(model.ask, text)
            if crash_after_call:
                raise RuntimeError("crash")
            action.emit(Event("answer", {"reply": reply}))
            return (action.last_source, reply)


def test_a_completed_action_is_reused_after_a_restore_and_the_model_is_not_asked_again(file_url):
    model = Model()

    async def first():
        store = await Store.open(file_url)
        assert store.restored.checkpoint is None and store.restored.from_earliest
        assert await answer(store, model, "k", 0, "hello") == ("executed", b"answer to hello")

    async def second():
        store = await Store.open(file_url)
        return await answer(store, model, "k", 0, "hello")

    run(first())
    assert run(second()) == ("reused", b"answer to hello")
    assert model.calls == ["hello"]


def test_a_half_done_action_resumes_from_its_journal_after_a_restore(file_url):
    model = Model()

    async def crashed():
        store = await Store.open(file_url)
        with pytest.raises(RuntimeError):
            await answer(store, model, "k", 0, "hello", crash_after_call=True)

    async def again():
        store = await Store.open(file_url)
        with store.round("k", 0, Event("question", {"text": "hello"})) as round:
            async with store.action(round, "answer") as action:
                assert action.resumed and not action.reused
                reply = await action.call(model.ask, "hello")
                assert action.last_source == "journal"
                action.emit(Event("answer", {"reply": reply}))
                return reply

    run(crashed())
    assert run(again()) == b"answer to hello"
    assert model.calls == ["hello"], "the journaled call ran again"


def test_a_changed_input_invalidates_its_round_and_the_later_ones(file_url):
    model = Model()

    async def history():
        store = await Store.open(file_url)
        for seq, text in enumerate(["a", "b", "c"]):
            await answer(store, model, "k", seq, text)

    async def replay():
        store = await Store.open(file_url)
        got = [await answer(store, model, "k", 0, "a")]
        # The input of round 1 changed: rounds 1 and 2 run again; round 0 is reused.
        got.append(await answer(store, model, "k", 1, "B"))
        got.append(await answer(store, model, "k", 2, "c"))
        return got

    run(history())
    got = run(replay())
    assert got[0] == ("reused", b"answer to a")
    assert got[1] == ("executed", b"answer to B")
    assert got[2][0] == "executed", "a round after the divergence was reused"
    assert model.calls == ["a", "b", "c", "B", "c"]


def test_in_memory_a_completed_action_is_reused_and_a_failed_one_resumes():
    model = Model()

    async def scenario():
        store = await Store.open("memory")
        assert await answer(store, model, "k", 0, "x") == ("executed", b"answer to x")
        assert await answer(store, model, "k", 0, "x") == ("reused", b"answer to x")
        with pytest.raises(RuntimeError):
            await answer(store, model, "k", 1, "y", crash_after_call=True)
        assert await answer(store, model, "k", 1, "y") == ("journal", b"answer to y")
        # A changed input in memory too: the round runs again.
        assert await answer(store, model, "k", 1, "z") == ("executed", b"answer to z")

    run(scenario())
    assert model.calls == ["x", "y", "z"]


def test_explain_says_what_begin_would_decide_without_changing_anything():
    async def scenario():
        store = await Store.open("memory")
        model = Model()
        await answer(store, model, "k", 0, "x")
        round = store.round("k", 0, Event("question", {"text": "x"}))
        hit = store.explain(round, "answer")
        changed = store.round("k", 0, Event("question", {"text": "other"}))
        miss = store.explain(changed, "answer")
        round.finish()
        changed.finish()
        return hit, miss

    hit, miss = run(scenario())
    assert hit["decision"].startswith("Hit"), hit
    assert miss["would_invalidate"] == 1 and miss["divergence"] is not None, miss


def test_a_checkpoint_keeps_metadata_and_an_older_one_can_be_restored(file_url):
    async def write():
        store = await Store.open(file_url)
        first = await store.checkpoint_json({"next": 1})
        second = await store.checkpoint(b"raw")
        return first, second

    async def read(checkpoint=None):
        store = await Store.open(file_url, checkpoint=checkpoint)
        return store.restored

    first, second = run(write())
    latest = run(read())
    assert (latest.checkpoint, latest.metadata) == (second, b"raw")
    older = run(read(first))
    assert older.checkpoint == first and older.metadata_json() == {"next": 1}


def test_an_operator_invalidation_makes_the_rounds_run_again(file_url):
    model = Model()

    async def scenario():
        store = await Store.open(file_url)
        for seq, text in enumerate(["a", "b"]):
            await answer(store, model, "k", seq, text)
        removed, records = await store.invalidate("k", 1, "bad answer")
        assert removed == 1 and records == 2, (removed, records)
        assert (await answer(store, model, "k", 0, "a"))[0] == "reused"
        assert (await answer(store, model, "k", 1, "b"))[0] == "executed"

    run(scenario())
    assert model.calls == ["a", "b", "b"]


def test_outputs_trigger_actions_that_are_reused_with_their_producer(file_url):
    from actionstate import Trigger

    async def attempt():
        store = await Store.open(file_url)
        ran = []
        with store.round("k", 0, Event("question", {"text": "q"})) as round:
            async with store.action(round, "plan") as plan:
                if not plan.reused:
                    ran.append("plan")
                    plan.emit(Event("step", {"n": 1}))
            step = plan.outputs[0]
            async with store.action(round, "act", step, Trigger.emitted(plan.key, 0)) as act:
                if not act.reused:
                    ran.append("act")
        return ran

    assert run(attempt()) == ["plan", "act"]
    assert run(attempt()) == []


def test_reclaim_status_reports_retention():
    async def scenario():
        store = await Store.open("memory")
        return store.reclaim_status()

    status = run(scenario())
    assert set(status) >= {"disabled", "reclaims", "records_reclaimed", "failures", "waiting"}
    assert status["failures"] == 0
