"""The exceptions of actionstate: one class per kind of store error, as the Rust
``StoreError`` has them, all under :class:`ActionStateError`.

Every store exception says whether retrying the same operation may succeed
(``retryable``) and which error it is (``kind``, the Rust variant in snake case, such as
``checkpoint_not_found``).
"""

from __future__ import annotations

__all__ = [
    "ActionStateError",
    "ArgsError",
    "CallFailed",
    "CheckpointError",
    "ConfigError",
    "FencedError",
    "HandleError",
    "LogError",
    "NotOwnedError",
    "RebuildError",
    "Suspended",
    "WaitError",
]


class ActionStateError(Exception):
    """An error of the store.

    Attributes:
        retryable: whether the same operation may succeed if tried again (a broker that
            moved, a timeout); ``False`` for bad input and broken logs.
        kind: which error it is: the Rust ``StoreError`` variant in snake case.
    """

    def __init__(self, message: str, retryable: bool = False, kind: str = "action_state_error") -> None:
        super().__init__(message)
        self.retryable = retryable
        self.kind = kind


class LogError(ActionStateError):
    """The log failed (an append, a read, its offsets), or a record in it does not decode."""


class RebuildError(ActionStateError):
    """A restore's read of the log stalled or missed its deadline (retryable)."""


class ConfigError(ActionStateError):
    """A log URL or setting could not be understood."""


class FencedError(ActionStateError):
    """A newer owner restored this store's keys: this store writes nothing more."""


class NotOwnedError(ActionStateError):
    """Work on a key whose key group this store does not own."""


class CheckpointError(ActionStateError):
    """A checkpoint asked for is not in the log, is incomplete, or its metadata does not
    decode."""


class ArgsError(ActionStateError):
    """The arguments of a durable call or wait cannot be encoded canonically for their digest
    (pass ``digest=`` to give one)."""


class HandleError(ActionStateError):
    """An action used after it completed, or after it suspended on a wait."""


class WaitError(ActionStateError):
    """A wait token that names no wait, or a reply too large."""


class Suspended(ActionStateError):
    """The action suspended on a durable wait: it does nothing more until it is begun again,
    once the wait is resolved. ``token`` is what the resolver needs."""

    def __init__(self, token: str) -> None:
        super().__init__("the action suspended on a durable wait", False, "suspended")
        self.token = token


class CallFailed(Exception):
    """The error outcome of a durable call, as its function reported it: raise it inside the
    call to journal ``payload`` as the call's error; the call, and every replay of it, raises
    it again. Any other exception journals nothing (the call runs again next time)."""

    def __init__(self, payload: bytes) -> None:
        super().__init__(f"durable call failed ({len(payload)} bytes)")
        self.payload = bytes(payload)
