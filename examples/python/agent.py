"""An agent written in Python: a model decides, a tool acts, and a crash comes in between.

Each support ticket is one action. The model (a local stand-in) decides which tool to call;
the tool is an HTTP service that deduplicates by the `Idempotency-Key` header, as payment
APIs do, and the durable call hands the key (`idempotency_key()`). With `--crash`, the agent
dies right after the tool's effect, before the result is journaled: the next run resumes
the action, replays the model's decision from the journal, and calls the tool again under
the same key, so the service applies the effect once.

    python agent.py SERVICE_URL [--crash]

The service is the simulator's (`cargo run -p actionstate-examples --bin external-service`
prints its URL).
"""

import asyncio
import json
import os
import sys
import urllib.request

from actionstate import Event, Store, idempotency_key

SERVICE = sys.argv[1]
CRASH = "--crash" in sys.argv[2:]


def decide(ticket: str) -> dict:
    # A stand-in for the model: which tool, with what.
    if "refund" in ticket:
        return {"tool": "refund", "amount": 20}
    return {"tool": "track", "amount": 0}


def call_tool(tool: str, amount: int, logical_call: str) -> bytes:
    request = urllib.request.Request(
        f"{SERVICE}/v1/calls/{tool}",
        data=json.dumps({"amount": amount}).encode(),
        method="POST",
        headers={"Idempotency-Key": idempotency_key(), "X-Logical-Call": logical_call},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        receipt = response.read()
    if CRASH:
        os._exit(3)  # the effect is made; its result is not journaled yet
    return receipt


async def main() -> None:
    store = await Store.open("file:./agent-data")
    tickets = ["I want a refund for order 7", "Where is order 8?"]
    for seq, ticket in enumerate(tickets):
        with store.round("customer-7", seq, Event("ticket", {"text": ticket})) as round:
            async with store.action(round, "support") as action:
                if action.reused:
                    print(f"ticket {seq}: answered before")
                    continue
                decision = await action.call_json(decide, ticket)
                receipt = await action.call(call_tool, decision["tool"], decision["amount"], f"customer-7/{seq}")
                action.emit(Event("reply", {"receipt": receipt}))
                print(f"ticket {seq}: {decision['tool']} ({action.last_source})")


asyncio.run(main())
