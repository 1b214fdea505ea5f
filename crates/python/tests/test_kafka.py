"""The Kafka backend on the local broker: the same store, on a topic."""

from __future__ import annotations

import time

import pytest

from actionstate import Event, LogError, Store
from conftest import run


async def answer(store: Store, seq: int, asked: list) -> str:
    with store.round("customer-42", seq, Event("question", {"n": seq})) as round:
        async with store.action(round, "answer") as act:
            if act.reused:
                return "reused"
            await act.call(lambda: asked.append(seq) or b"ok", name="llm")
            act.emit(Event("answer", {"n": seq}))
            return act.last_source


def test_reuse_and_resume_on_a_kafka_topic_across_restores(kafka_url):
    asked: list = []

    async def first():
        store = await Store.open(kafka_url)
        got = [await answer(store, seq, asked) for seq in range(2)]
        # Rounds 0 and 1 are finished: a restore of this checkpoint resumes at round 2.
        await store.checkpoint_json({"next": 2})
        got.append(await answer(store, 2, asked))
        return got

    async def second():
        store = await Store.open(kafka_url)
        assert store.restored.metadata_json() == {"next": 2}
        return [await answer(store, seq, asked) for seq in range(2, 4)]

    assert run(first()) == ["executed"] * 3
    assert run(second()) == ["reused", "executed"]
    assert asked == [0, 1, 2, 3]


def test_an_unreachable_broker_fails_within_seconds_and_is_retryable(kafka_url):
    # The wheel CI builds has the Kafka backend: this also checks that it does.
    started = time.monotonic()
    with pytest.raises(LogError) as raised:
        run(Store.open("kafka://127.0.0.1:1/nowhere?request_timeout=2s"))
    assert raised.value.retryable, raised.value
    assert time.monotonic() - started < 30
