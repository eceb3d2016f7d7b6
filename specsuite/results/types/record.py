"""The record base of the results model: a JSON object with named fields that keeps every key it does not name.

How a record keeps what it does not know: ``from_dict`` fills the named fields and keeps every other
key in ``extra``, and remembers the key order it read; ``to_dict`` writes the keys back in that
order, then the named fields set since (those left at their empty default are not written), then
new ``extra`` keys.  A value of an unexpected shape (a list where a record was expected) is kept as it was, not lost.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

R = TypeVar("R", bound="Record")
_HIDDEN = ("extra", "key_order")


@dataclass
class Record:
    """A JSON object with named fields; keys it does not name stay in ``extra``."""

    # field name -> (kind, record class): values loaded as records, not dicts.  kind: "one", "list" or "map"
    # (name -> record); maps of maps are "map.map", "map.map.map" (the A/B spread: metric -> case -> arm -> entry).
    NESTED: ClassVar[dict[str, tuple[str, type[Record]]]] = {}

    extra: dict[str, Any] = field(default_factory=dict, repr=False, compare=False, kw_only=True)
    key_order: tuple[str, ...] = field(default=(), repr=False, compare=False, kw_only=True)

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(cls) if f.name not in _HIDDEN)

    @classmethod
    def from_dict(cls: type[R], data: dict[str, Any]) -> R:
        names = set(cls.field_names())
        values: dict[str, Any] = {}
        extra: dict[str, Any] = {}
        for key, value in data.items():
            if key not in names:
                extra[key] = value
                continue
            loaded = _load(cls.NESTED.get(key), value)
            if loaded is _WRONG_SHAPE:
                extra[key] = value  # kept as written; the typed field stays empty
            else:
                values[key] = loaded
        return cls(**values, extra=extra, key_order=tuple(data))

    @classmethod
    def written(cls: type[R], **values: Any) -> R:
        """A record of these field values, each written (default or not) in the order given, as a dict literal
        of them would be: the way a writer builds a record whose file has always carried every key."""
        return cls(**values, key_order=tuple(values))

    def put(self, key: str, value: Any) -> None:
        """Set a key as ``dict[key] = value`` would: a new key goes last, a known one keeps its place (writers that
        build a record step by step keep the key order their files always had); keys the type does not name go to
        ``extra``; a dict given for a nested record field is loaded as that record."""
        if key in self.field_names():
            loaded = _load(self.NESTED.get(key), value)
            setattr(self, key, value if loaded is _WRONG_SHAPE else loaded)
        else:
            self.extra[key] = value
        if key not in self.key_order:
            self.key_order = (*self.key_order, key)

    def update(self, **values: Any) -> None:
        """`put` for each keyword, in order (``dict.update``)."""
        for key, value in values.items():
            self.put(key, value)

    def has(self, name: str) -> bool:
        """Whether the named field holds a value of its own: read from the dict (in the shape its
        type expects), or set away from its default since."""
        if name in self.extra:
            return False
        if name in self.key_order:
            return True
        spec = next(f for f in dataclasses.fields(self) if f.name == name)
        return getattr(self, name) != _default_of(spec)

    def to_dict(self) -> dict[str, Any]:
        named = self.field_names()
        defaults = {f.name: _default_of(f) for f in dataclasses.fields(self) if f.name in named}
        out: dict[str, Any] = {}
        for key in self.key_order:
            if key in named and key not in self.extra:
                out[key] = _dump(getattr(self, key))
            elif key in self.extra:
                out[key] = self.extra[key]
        for name in named:
            value = getattr(self, name)
            if name not in out and name not in self.extra and value != defaults[name]:
                out[name] = _dump(value)
        out.update((key, value) for key, value in self.extra.items() if key not in out)
        return out


class _WrongShape:
    pass


_WRONG_SHAPE = _WrongShape()


def _load(nested: tuple[str, type[Record]] | None, value: Any) -> Any:
    if nested is None or value is None:
        return value
    kind, record = nested
    return _load_kind(kind, record, value)


def _load_kind(kind: str, record: type[Record], value: Any) -> Any:
    """``value`` loaded as ``kind`` of ``record``; _WRONG_SHAPE when any part of it is not of that shape."""
    if kind == "one":
        return _load_one(record, value)
    if kind == "list":
        loaded = [_load_one(record, item) for item in value] if isinstance(value, list) else [_WRONG_SHAPE]
        return _WRONG_SHAPE if any(item is _WRONG_SHAPE for item in loaded) else loaded
    inner = kind.partition(".")[2] or "one"  # "map": name -> record; "map.map": name -> (name -> record); ...
    if not isinstance(value, dict):
        return _WRONG_SHAPE
    mapped = {key: _load_kind(inner, record, item) for key, item in value.items()}
    return _WRONG_SHAPE if any(item is _WRONG_SHAPE for item in mapped.values()) else mapped


def _load_one(record: type[Record], value: Any) -> Any:
    """A dict as the record (a record of that class, as it is); anything else is of the wrong shape."""
    if isinstance(value, record):
        return value
    return record.from_dict(value) if isinstance(value, dict) else _WRONG_SHAPE


def _dump(value: Any) -> Any:
    if isinstance(value, Record):
        return value.to_dict()
    if isinstance(value, list):
        return [_dump(item) for item in value]
    if isinstance(value, dict):
        return {key: _dump(item) for key, item in value.items()}
    return value


def _default_of(spec: dataclasses.Field) -> Any:
    if spec.default is not dataclasses.MISSING:
        return spec.default
    if spec.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
        return spec.default_factory()  # type: ignore[misc]
    return _WRONG_SHAPE  # a required field is always written
