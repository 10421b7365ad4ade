"""The transparent proxy ``wrap()`` returns.

It stands in for the client: attribute reads go to the client, method calls go through the
:class:`~agentrein._guard.Guard`, service objects the connector names (:meth:`Connector.descend`) are wrapped in
turn, whether reached as attributes (``client.v1.customers``) or returned by calls (``gh.get_repo(...)``, and
the items of a returned list), and ``isinstance(proxy, type(client))`` stays true, so code and type checks
written for the client keep working.
"""

from __future__ import annotations

from collections.abc import Awaitable, Iterator
from typing import Any

from agentrein._guard import Guard

_TARGET = "_agentrein_target"
_GUARD = "_agentrein_guard"
_PATH = "_agentrein_path"


class WrappedClient:
    __slots__ = (_GUARD, _PATH, _TARGET)

    def __init__(self, target: Any, guard: Guard, path: tuple[str, ...] = ()) -> None:
        object.__setattr__(self, _TARGET, target)
        object.__setattr__(self, _GUARD, guard)
        object.__setattr__(self, _PATH, path)

    @property  # type: ignore[misc]
    def __class__(self) -> type:  # isinstance() consults __class__ when type() does not match
        return type(object.__getattribute__(self, _TARGET))

    def __getattr__(self, name: str) -> Any:
        target = object.__getattribute__(self, _TARGET)
        guard: Guard = object.__getattribute__(self, _GUARD)
        value = getattr(target, name)
        path = (*object.__getattribute__(self, _PATH), name)
        if callable(value) and not isinstance(value, type):

            def guarded(*args: Any, **kwargs: Any) -> Any:
                result = guard.call(path, value, args, kwargs)
                # An awaitable's type has __await__ (a cheaper test than inspect.isawaitable, on every call).
                return _wrap_later(result, guard) if hasattr(type(result), "__await__") else _wrap(result, guard)

            guarded.__name__ = name
            guarded.__doc__ = getattr(value, "__doc__", None)
            return guarded
        if guard.options.connector.descend(value):
            return WrappedClient(value, guard, path)
        return value

    def __iter__(self) -> Iterator[Any]:
        guard: Guard = object.__getattribute__(self, _GUARD)
        for item in object.__getattribute__(self, _TARGET):
            yield _wrap(item, guard)

    def __getitem__(self, key: Any) -> Any:
        return _wrap(object.__getattribute__(self, _TARGET)[key], object.__getattribute__(self, _GUARD))

    def __len__(self) -> int:
        return len(object.__getattribute__(self, _TARGET))

    def __eq__(self, other: object) -> bool:
        return bool(object.__getattribute__(self, _TARGET) == _unwrapped(other))

    def __hash__(self) -> int:
        return hash(object.__getattribute__(self, _TARGET))

    def __bool__(self) -> bool:  # defined, or the __len__ above would decide (and fail for clients)
        return bool(object.__getattribute__(self, _TARGET))

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(object.__getattribute__(self, _TARGET), name, value)

    def __delattr__(self, name: str) -> None:
        delattr(object.__getattribute__(self, _TARGET), name)

    def __dir__(self) -> list[str]:
        return dir(object.__getattribute__(self, _TARGET))

    def __repr__(self) -> str:
        return f"<agentrein wrapped {object.__getattribute__(self, _TARGET)!r}>"

    # `with wrap(client) as c:` must hand back the proxy, not the raw client the client's __enter__ returns.
    def __enter__(self) -> WrappedClient:
        object.__getattribute__(self, _TARGET).__enter__()
        return self

    def __exit__(self, *exc_info: Any) -> Any:
        return object.__getattribute__(self, _TARGET).__exit__(*exc_info)

    async def __aenter__(self) -> WrappedClient:
        await object.__getattribute__(self, _TARGET).__aenter__()
        return self

    async def __aexit__(self, *exc_info: Any) -> Any:
        return await object.__getattribute__(self, _TARGET).__aexit__(*exc_info)


def _unwrapped(value: Any) -> Any:
    return object.__getattribute__(value, _TARGET) if type(value) is WrappedClient else value


def _wrap(value: Any, guard: Guard) -> Any:
    """A call's result: a service object the connector names is wrapped, guarded in its own right."""
    if guard.options.connector.descend(value):
        return WrappedClient(value, guard.rooted_at(value))
    return value


async def _wrap_later(result: Awaitable[Any], guard: Guard) -> Any:
    return _wrap(await result, guard)
