import asyncio

from actionstate import Event, Store


async def ask_model(question: str) -> bytes:
    # The model call goes here; its result is journaled before it is returned.
    return f"an answer to {question}".encode()


async def main() -> None:
    # The latest checkpoint in the log (none on the first run) and the input position it saved.
    store = await Store.open("file:./actionstate-data")
    next_input = store.restored.metadata_json() or 0

    questions = ["What is my balance?", "Close my account", "Thank you"]
    asked = reused = 0
    while next_input < len(questions):
        question = questions[next_input]
        with store.round("customer-42", next_input, Event("question", {"text": question})) as round:
            async with store.action(round, "answer") as action:
                if action.reused:
                    # Answered before the restart: replay its outputs, do not ask again.
                    reused += 1
                else:
                    reply = await action.call(ask_model, question)
                    asked += action.last_source == "executed"
                    action.emit(Event("answer", {"reply": reply}))
        # The round's block finished it: a checkpoint from now on need not replay it.
        next_input += 1
        # Every second input, a checkpoint with the position to resume from.
        if next_input % 2 == 0:
            await store.checkpoint_json(next_input)
    print(f"model calls: {asked}, answers reused: {reused}")


asyncio.run(main())
