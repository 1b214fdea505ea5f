"""Durable action state with safe replay, for agents written in Python.

When a process crashes and replays its inputs from a checkpoint, actions that completed
are reused instead of run again, half-done actions resume from their journal of durable
calls, and history that no longer matches the replay is invalidated so that exactly those
actions run again. The state lives in an ordered log named by a URL: ``file:DIR`` (the
embedded default), ``memory``, ``kafka://HOST:PORT/TOPIC`` or
``fluss://HOST:PORT/DATABASE/TABLE`` (the server backends when the wheel is built with
them).

A service that restores itself::

    store = await Store.open("file:./actionstate-data")
    seq = store.restored.metadata_json() or 0
    with store.round("customer-42", seq, Event("question", {"text": text})) as round:
        async with store.action(round, "answer") as action:
            if not action.reused:
                reply = await action.call(ask_model, text)
                action.emit(Event("answer", {"reply": reply}))
    await store.checkpoint_json(seq + 1)

The store's operations are coroutines; the Rust work behind them runs on the package's own
tokio runtime, with the GIL released.
"""

from __future__ import annotations

import contextvars
import inspect
import json
import math
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Optional, Union

from . import _native
from .errors import (
    ActionStateError,
    ArgsError,
    CallFailed,
    CheckpointError,
    ConfigError,
    FencedError,
    HandleError,
    LogError,
    NotOwnedError,
    RebuildError,
    Suspended,
    WaitError,
)

__all__ = [
    "Action",
    "ActionStateError",
    "ArgsError",
    "CallFailed",
    "CheckpointError",
    "ConfigError",
    "Event",
    "FencedError",
    "HandleError",
    "LogError",
    "NotOwnedError",
    "RebuildError",
    "Restored",
    "Round",
    "Store",
    "Suspended",
    "Trigger",
    "WaitError",
    "WaitResult",
    "canonical_json",
    "function_id",
    "idempotency_key",
]

__version__: str = _native.__version__

_CALL_KEY: contextvars.ContextVar[str] = contextvars.ContextVar("actionstate_idempotency_key")


def idempotency_key() -> str:
    """The idempotency key of the durable call (or reconciler) running now.

    The same for every attempt of one logical call (retries, runs after a crash, a new
    owner), new once its history is invalidated: send it to a service that deduplicates by
    it, and a call that ran before its result was durable makes its effect once. Raises
    :class:`HandleError` outside a durable call.
    """
    try:
        return _CALL_KEY.get()
    except LookupError:
        raise HandleError("idempotency_key() is known only inside a durable call", False, "no_call") from None


@dataclass(frozen=True)
class Event:
    """An event: a type and attributes.

    Attribute values are ``None``, ``bool``, ``int`` (64-bit), ``float``, ``str``, ``bytes``,
    and lists and ``str``-keyed dicts of these. Two events with the same type and attributes
    have the same fingerprint, which is how a replayed input is recognised. ``id`` is set on
    the events the store gives back (a reused action's outputs keep their ids).
    """

    type: str
    attributes: dict = field(default_factory=dict)
    id: Optional[bytes] = None


@dataclass(frozen=True)
class Trigger:
    """What triggered an action other than its round's input: an output of another action of
    the round (:meth:`emitted`), or an event the runtime mints on every attempt
    (:meth:`bootstrap`)."""

    _form: tuple

    @staticmethod
    def emitted(producer: bytes, index: int) -> "Trigger":
        """Output number ``index`` of the action whose state key is ``producer``
        (:attr:`Action.key`)."""
        return Trigger(("emitted", bytes(producer), int(index)))

    @staticmethod
    def bootstrap(label: str) -> "Trigger":
        """An event minted on every attempt, under a stable ``label``."""
        return Trigger(("bootstrap", str(label)))


@dataclass(frozen=True)
class Restored:
    """What :meth:`Store.open` restored.

    Attributes:
        metadata: the metadata of the checkpoint restored; ``None`` on a fresh start.
        checkpoint: its id; ``None`` on a fresh start.
        from_earliest: whether some keys had no checkpoint and replay from the start.
        records: records read from the log to rebuild the store.
    """

    metadata: Optional[bytes]
    checkpoint: Optional[int]
    from_earliest: bool
    records: int

    def metadata_json(self) -> Any:
        """The metadata decoded as JSON (as :meth:`Store.checkpoint_json` wrote it); ``None``
        on a fresh start. Raises :class:`CheckpointError` if it is not JSON."""
        if self.metadata is None:
            return None
        try:
            return json.loads(self.metadata)
        except ValueError as e:
            raise CheckpointError(f"checkpoint metadata ({len(self.metadata)} bytes) is not JSON: {e}", False, "metadata") from None


@dataclass(frozen=True)
class WaitResult:
    """How a durable wait ended: ``outcome`` is ``"reply"``, ``"rejected"`` or
    ``"timed_out"``; ``payload`` the reply or the rejection's reason (``None`` on a
    timeout)."""

    outcome: str
    payload: Optional[bytes]


def canonical_json(value: Any) -> str:
    """``value`` as canonical JSON (keys sorted, no whitespace): what a durable call's
    arguments are digested from, the same in every process.

    Only JSON values have one: ``None``, ``bool``, ``int``, finite ``float``, ``str``,
    lists and tuples of these, and dicts with ``str`` keys. Anything else raises
    :class:`ArgsError` naming where it is; give the call a ``digest=`` instead.
    """
    _check_canonical(value, "arguments")
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def _check_canonical(value: Any, where: str) -> None:
    if value is None or isinstance(value, (bool, int, str)):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ArgsError(f"{where}: {value} has no canonical JSON form", False, "args")
        return
    if isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            _check_canonical(item, f"{where}[{i}]")
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise ArgsError(f"{where}: key {key!r} is not a str", False, "args")
            _check_canonical(item, f"{where}[{key!r}]")
        return
    raise ArgsError(
        f"{where}: a {type(value).__name__} has no canonical encoding; pass digest= (32 bytes) to the call",
        False,
        "args",
    )


def function_id(func: Callable[..., Any]) -> str:
    """The id a durable call of ``func`` is journaled under unless the call names one:
    ``module.qualname``, as Flink Agents names Python functions. Stable across processes
    for functions, methods, static and class methods; lambdas of one scope share theirs, so
    name them (``name=``) when a scope has several."""
    target = getattr(func, "__func__", func)
    module = getattr(target, "__module__", None)
    qualname = getattr(target, "__qualname__", None)
    if module is None or qualname is None:
        raise ArgsError(f"{func!r} has no module and qualified name: pass name= to the call", False, "args")
    return f"{module}.{qualname}"


class Store:
    """An open store on one log: restored from its latest checkpoint by :meth:`open`."""

    def __init__(self, native: Any, restored: Restored) -> None:
        self._native = native
        #: What the restore found.
        self.restored = restored

    @classmethod
    async def open(cls, url: str = "file:./actionstate-data", *, checkpoint: Optional[int] = None) -> "Store":
        """Opens the log ``url`` and restores its latest checkpoint (or checkpoint
        ``checkpoint``), replaying the log from there. A log without checkpoints restores
        from its start: a fresh start."""
        native, metadata, restored_id, from_earliest, records = await _native.restore(url, checkpoint)
        return cls(native, Restored(metadata, restored_id, from_earliest, records))

    async def checkpoint(self, metadata: bytes = b"") -> int:
        """Writes a checkpoint into the log with ``metadata`` (up to 64 KiB, such as the input
        position to resume from); returns its id. Rounds finished before it are not replayed
        by a restore of it."""
        return await self._native.checkpoint(bytes(metadata))

    async def checkpoint_json(self, metadata: Any) -> int:
        """:meth:`checkpoint` with ``metadata`` as JSON (:meth:`Restored.metadata_json` reads
        it back)."""
        return await self.checkpoint(json.dumps(metadata, separators=(",", ":")).encode())

    def round(self, key: str, seq: int, input: Event) -> "Round":
        """Starts the round of ``key``'s ``seq``-th input. Use it as a context manager: it
        finishes when the block ends without an exception; with one, it stays unfinished (and
        is counted as dropped), so a restore replays it."""
        native = self._native.round(key, seq, input.type, input.attributes)
        return Round(native, key, seq, input)

    def action(self, round: "Round", name: str, event: Optional[Event] = None, trigger: Optional[Trigger] = None) -> "Action":
        """The action ``name`` of ``round`` on ``event`` (the round's input by default), as an
        async context manager: entering it looks the action up (reuse, resume or run); leaving
        it without an exception completes it with what it emitted. An exception (or a
        cancellation) leaves it incomplete, as a crash would: its next attempt resumes from
        its journal."""
        return Action(self, round, name, event if event is not None else round.input, trigger)

    def explain(self, round: "Round", name: str, event: Optional[Event] = None, trigger: Optional[Trigger] = None) -> dict:
        """What entering :meth:`action` would decide, without changing anything: ``decision``,
        ``divergence``, ``would_invalidate`` and ``incarnation``."""
        event = event if event is not None else round.input
        return self._native.explain(round._native, name, event.type, event.attributes, _trigger(trigger))

    async def invalidate(self, key: str, from_seq: int, reason: str) -> tuple[int, int]:
        """An operator's repair: removes every state of ``key`` from round ``from_seq`` on, so
        those rounds run again. Returns (states removed, records appended)."""
        return await self._native.invalidate(key, from_seq, reason)

    def reclaim_status(self) -> dict:
        """What retention reclaimed from the log, and why it does not run when it does not."""
        return self._native.reclaim_status()

    def waits(self) -> list[dict]:
        """The durable waits to know about: pending, or resolved and not yet resumed."""
        return self._native.waits()

    async def resolve(self, token: str, reply: bytes) -> tuple[str, Optional[bytes], bool]:
        """Resolves the wait of ``token`` with ``reply``: (outcome, payload, recorded). Only
        the first outcome counts; a later one records nothing and returns the first."""
        return await self._native.resolve(token, bytes(reply), False)

    async def reject(self, token: str, reason: bytes) -> tuple[str, Optional[bytes], bool]:
        """Rejects the wait of ``token`` with ``reason``, as :meth:`resolve` resolves it."""
        return await self._native.resolve(token, bytes(reason), True)


class Round:
    """A round (one input of one key) the runtime works on; see :meth:`Store.round`."""

    def __init__(self, native: Any, key: str, seq: int, input: Event) -> None:
        self._native = native
        #: The business key.
        self.key = key
        #: The input's sequence number for the key.
        self.seq = seq
        #: The input event.
        self.input = input

    def finish(self) -> None:
        """Every action of the round is done: a checkpoint from now on need not replay it."""
        self._native.finish()

    def suspend(self) -> None:
        """An action of the round suspended on a durable wait: the round stays live (a restore
        replays it) without counting as dropped."""
        self._native.suspend()

    def __enter__(self) -> "Round":
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> bool:
        if exc_type is None:
            self.finish()
        elif isinstance(exc, Suspended):
            self.suspend()
        return False


class Action:
    """An action of a round; see :meth:`Store.action`.

    Attributes after entering:
        reused: the action completed before; ``outputs`` are its outputs, and nothing runs.
        resumed: the action started before; its durable calls replay from the journal.
        reason: why a fresh action missed (``None`` otherwise).
        outputs: the outputs of a reused action; after completion, what it emitted.
        key: the action's state key (bytes; what :meth:`Trigger.emitted` names).
        last_source: where the last call's result came from: ``"executed"``, ``"journal"`` or
            ``"reconciled"``.
    """

    def __init__(self, store: Store, round: Round, name: str, event: Event, trigger: Optional[Trigger]) -> None:
        self._store = store
        self._round = round
        self.name = name
        self.event = event
        self._trigger = trigger
        self._native: Any = None
        self._emitted: list[Event] = []
        self._done = False
        self.reused = False
        self.resumed = False
        self.reason: Optional[str] = None
        self.outputs: list[Event] = []
        self.key: Optional[bytes] = None
        self.last_source: Optional[str] = None

    async def __aenter__(self) -> "Action":
        begun = await self._store._native.begin(
            self._round._native, self.name, self.event.type, self.event.attributes, _trigger(self._trigger)
        )
        if begun[0] == "reuse":
            self.reused = True
            self.outputs = [Event(t, a, i) for (t, a, i) in begun[1]]
            self.key = begun[2]
        else:
            self._native = begun[1]
            self.key = self._native.key
            self.resumed = begun[0] == "resume"
            self.reason = begun[2] if begun[0] == "fresh" else None
        return self

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> bool:
        if exc_type is None and not self.reused and not self._done:
            await self.complete()
        return False

    def emit(self, event: Event) -> None:
        """Adds an output: the action completes with its outputs in the order emitted."""
        if self.reused or self._done:
            raise HandleError(f"action {self.name}: emit after it completed", False, "completed")
        self._emitted.append(event)

    async def complete(self) -> None:
        """Completes the action with what it emitted (leaving the ``async with`` block does
        this): its outputs become durable, and a replay reuses them."""
        native = self._running()
        await self._store._native.complete(native, [(e.type, e.attributes) for e in self._emitted])
        self._done = True
        self.outputs = list(self._emitted)

    async def call(
        self,
        func: Callable[..., Union[bytes, Awaitable[bytes]]],
        /,
        *args: Any,
        name: Optional[str] = None,
        digest: Optional[bytes] = None,
        reconcile: Optional[Callable[[], Union[bytes, Awaitable[bytes]]]] = None,
        **kwargs: Any,
    ) -> bytes:
        """Runs ``func(*args, **kwargs)`` as a durable call, or replays its result.

        ``func`` (plain or ``async``) returns ``bytes``, or raises :class:`CallFailed` to
        report an error outcome; both are journaled before the call returns, and a replay
        returns (or raises) them without running ``func``. Any other exception journals
        nothing and propagates: the action stays incomplete, and its next attempt runs the
        call again. Inside ``func``, :func:`idempotency_key` gives the call's key.

        The call is journaled under ``name`` (default :func:`function_id`) and the digest of
        its arguments' :func:`canonical_json`, or ``digest``: a replay that calls another
        function or other arguments is a different history, and runs.

        With ``reconcile``, the call is marked as started before ``func`` runs; if a crash
        (or an exception) ends it before its result is durable, the next attempt runs
        ``reconcile()`` instead, which asks the service, by :func:`idempotency_key`, what the
        call did.
        """
        ok, payload = await self._call(func, args, kwargs, name, digest, reconcile, _as_bytes)
        if not ok:
            raise CallFailed(payload)
        return payload

    async def call_json(
        self,
        func: Callable[..., Any],
        /,
        *args: Any,
        name: Optional[str] = None,
        digest: Optional[bytes] = None,
        reconcile: Optional[Callable[[], Any]] = None,
        **kwargs: Any,
    ) -> Any:
        """:meth:`call` for a function that returns a JSON value: journaled as JSON, returned
        decoded."""
        ok, payload = await self._call(func, args, kwargs, name, digest, reconcile, _as_json)
        if not ok:
            raise CallFailed(payload)
        return json.loads(payload)

    async def wait(self, name: str, *args: Any, timeout: Optional[float] = None) -> WaitResult:
        """Waits durably for a person's reply (or a slow system's). The wait is journaled
        before the action suspends: the first time, it raises :class:`Suspended` with the
        token for whoever resolves it (leaving the round's ``with`` block then suspends the
        round). Once resolved (:meth:`Store.resolve`), begin the action again: the wait
        returns the outcome. ``timeout`` (seconds) sets a deadline, recorded once."""
        native = self._running()
        args_json = canonical_json(list(args)) if args else None
        waited = await native.wait(name, args_json, timeout)
        if waited[0] == "suspended":
            raise Suspended(waited[1])
        return WaitResult(waited[1], waited[2])

    async def _call(self, func, args, kwargs, name, digest, reconcile, encode) -> tuple[bool, bytes]:
        native = self._running()
        function = name if name is not None else function_id(func)
        args_json = None if digest is not None else canonical_json([list(args), kwargs])

        async def run(key: str) -> tuple[bool, bytes]:
            return await _run(key, lambda: func(*args, **kwargs), encode)

        reconciler = None
        if reconcile is not None:
            if not callable(reconcile):
                raise TypeError(f"reconcile must be callable, not {type(reconcile).__name__}")

            async def reconciler(key: str) -> tuple[bool, bytes]:
                return await _run(key, reconcile, encode)

        ok, payload, source = await native.call(function, run, args_json, None if digest is None else bytes(digest), reconciler)
        self.last_source = source
        return ok, payload

    def _running(self) -> Any:
        if self._native is None:
            what = "it was reused" if self.reused else "it has not been entered (async with)"
            raise HandleError(f"action {self.name}: nothing runs, {what}", False, "not_running")
        if self._done:
            raise HandleError(f"action {self.name}: it completed already", False, "completed")
        return self._native


async def _run(key: str, invoke: Callable[[], Any], encode: Callable[[Any], bytes]) -> tuple[bool, bytes]:
    """Runs one attempt of a durable call (or its reconciler) with its key in context."""
    token = _CALL_KEY.set(key)
    try:
        try:
            result = invoke()
            if inspect.isawaitable(result):
                result = await result
        except CallFailed as failed:
            return False, failed.payload
        return True, encode(result)
    finally:
        _CALL_KEY.reset(token)


def _as_bytes(result: Any) -> bytes:
    if isinstance(result, (bytes, bytearray, memoryview)):
        return bytes(result)
    raise TypeError(f"a durable call returns bytes (call_json takes JSON values), not {type(result).__name__}")


def _as_json(result: Any) -> bytes:
    return json.dumps(result, separators=(",", ":"), allow_nan=False).encode()


def _trigger(trigger: Optional[Trigger]) -> Optional[tuple]:
    return None if trigger is None else trigger._form
