"""The I/O handlers of an interpreter: for each request type a generator hook may yield,
the function that answers it.

    handlers = Handlers().add(Lookup, lookup).add(Check, check)
    interp = SyncInterpreter(provider, handlers=handlers)

`add` is checked by mypy: the handler takes the request class's requests and returns its
answer type (`class Lookup(Request[bool])`: a function of a `Lookup` returning a bool, or
an awaitable of one under the async interpreters). `AskModel` is built in: every
interpreter answers it with its model provider.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterator, Mapping
from typing import TypeVar

from effects.requests import Request, RequestClass
from pipeline.processor import AskModel

Q = TypeVar("Q")
R = TypeVar("R")

Handler = Callable[[object], object]
"""A handler as an interpreter calls it: a request in, its answer (or an awaitable of it)
out. `Handlers.add` is where its types are checked."""


class Handlers(Mapping[type, Handler]):
    """Request type -> its handler; built with `add`, read as a mapping.

    An interpreter also takes a plain mapping of classes to handlers (unchecked by mypy,
    and the class need not be a `Request`); `Handlers.of` reads either, at construction.
    """

    __slots__ = ("_fns",)

    def __init__(self) -> None:
        self._fns: dict[type, Handler] = {}

    def add(
        self, request_type: RequestClass[Q, R], fn: Callable[[Q], R | Awaitable[R]]
    ) -> Handlers:
        """Answer the requests of `request_type` with `fn`; returns this registry.

        TypeError for a class that is not an `effects.Request` (or is `AskModel`, built
        in), a `fn` that is not callable, or a request type given a handler already."""
        if not (isinstance(request_type, type) and issubclass(request_type, Request)):
            raise TypeError(f"{request_type!r} is not a request type (an effects.Request)")
        self._put(request_type, fn)
        return self

    def _put(self, request_type: object, fn: object) -> None:
        if not isinstance(request_type, type):
            raise TypeError(f"handlers are keyed by request class, got {request_type!r}")
        name = request_type.__name__
        if request_type is AskModel:
            raise TypeError("AskModel is answered by the interpreter's model provider")
        if not callable(fn):
            raise TypeError(f"the handler for {name} is not callable: {fn!r}")
        if request_type in self._fns:
            raise TypeError(f"{name} has a handler already")
        self._fns[request_type] = fn

    @staticmethod
    def of(handlers: Mapping[type, Handler] | None, *, sync: bool = False) -> Handlers:
        """The registry an interpreter keeps for `handlers` (a `Handlers`, a mapping, or
        None: none). `sync`: an interpreter that cannot await refuses an async handler."""
        out = Handlers()
        for request_type, fn in (handlers or {}).items():
            if isinstance(handlers, Handlers):
                out._fns[request_type] = fn
            else:
                out._put(request_type, fn)
            if sync and inspect.iscoroutinefunction(fn):
                raise TypeError(
                    f"the handler for {request_type.__name__} is async: the sync "
                    "interpreter cannot await it (use the async interpreter)"
                )
        return out

    def with_defaults(self, defaults: Mapping[type, Handler]) -> Handlers:
        """A registry with `defaults` for the request types this one has no handler for
        (an interpreter's built-in ones: its circuit breaker's)."""
        out = Handlers()
        out._fns = {**defaults, **self._fns}
        return out

    def __getitem__(self, request_type: type) -> Handler:
        return self._fns[request_type]

    def __iter__(self) -> Iterator[type]:
        return iter(self._fns)

    def __len__(self) -> int:
        return len(self._fns)

    def __repr__(self) -> str:
        return f"Handlers({', '.join(t.__name__ for t in self._fns)})"

