"""Durable waits for a person's reply: suspended with a token, resolved once, resumed."""

from __future__ import annotations

import pytest

from actionstate import Event, Store, Suspended, WaitError
from conftest import crashes, run


async def pay(store: Store, charged: list) -> str:
    with store.round("invoice-7", 0, Event("invoice", {"amount": 120})) as round:
        async with store.action(round, "pay") as act:
            if act.reused:
                return "settled before"
            quote = await act.call(lambda: b"120 EUR", name="quote")
            approval = await act.wait("approval", quote.decode(), timeout=3600)
            if approval.outcome != "reply":
                return approval.outcome
            await act.call(lambda: charged.append(quote) or b"charged", name="charge")
            return f"paid, approved by {approval.payload.decode()}"


def test_a_wait_suspends_with_a_token_is_resolved_once_and_the_action_goes_on(file_url):
    charged: list = []

    async def first():
        store = await Store.open(file_url)
        with pytest.raises(Suspended) as suspended:
            await pay(store, charged)
        assert [w["status"] for w in store.waits()] == ["pending"]
        return suspended.value.token

    async def approve(token):
        store = await Store.open(file_url)
        first = await store.resolve(token, b"dana")
        second = await store.resolve(token, b"eve")
        return first, second, [w["status"] for w in store.waits()]

    async def again():
        store = await Store.open(file_url)
        return await pay(store, charged), await pay(store, charged)

    token = run(first())
    first_outcome, second_outcome, statuses = run(approve(token))
    assert first_outcome == ("reply", b"dana", True)
    assert second_outcome == ("reply", b"dana", False), "a later outcome is refused"
    assert statuses == ["reply"]
    assert run(again()) == ("paid, approved by dana", "settled before")
    assert charged == [b"120 EUR"]


def test_a_rejected_wait_returns_the_rejection_and_a_bad_token_is_a_wait_error():
    async def scenario():
        store = await Store.open("memory")
        try:
            await pay(store, [])
        except Suspended as s:
            token = s.token
        assert await store.reject(token, b"too much") == ("rejected", b"too much", True)
        outcome = await pay(store, [])
        with pytest.raises(ValueError):
            await store.resolve("not a token", b"")
        return outcome

    assert run(scenario()) == "rejected"
