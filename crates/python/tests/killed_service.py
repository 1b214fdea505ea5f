"""A service the SIGKILL campaign (test_sigkill.py) kills again and again.

Each input makes one side effect: a POST to the effect service at ``argv[2]`` with the durable
call's idempotency key, which the service deduplicates by. The service prints one line per
input it handles (``RUN seq reused|executed|journal``) and one once the action's completion
returned (``ACK seq``), and checkpoints every fifth input with the next input's position.
"""

import asyncio
import sys
import time
import urllib.request

from actionstate import Event, Store, idempotency_key

INPUTS = 150


def post_effect(url: str, seq: int) -> bytes:
    request = urllib.request.Request(
        f"{url}/effect/{seq}", data=str(seq).encode(), method="POST", headers={"Idempotency-Key": idempotency_key()}
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.read()


async def main(log_url: str, effects_url: str) -> None:
    store = await Store.open(log_url)
    seq = store.restored.metadata_json() or 0
    while seq < INPUTS:
        with store.round("customer", seq, Event("order", {"n": seq})) as round:
            async with store.action(round, "fulfil") as action:
                if action.reused:
                    print(f"RUN {seq} reused", flush=True)
                else:
                    receipt = await action.call(lambda: post_effect(effects_url, seq), name="effect")
                    print(f"RUN {seq} {action.last_source}", flush=True)
                    time.sleep(0.03)
                    action.emit(Event("receipt", {"body": receipt}))
        print(f"ACK {seq}", flush=True)
        seq += 1
        if seq % 5 == 0:
            await store.checkpoint_json(seq)
    print("DONE", flush=True)


asyncio.run(main(sys.argv[1], sys.argv[2]))
