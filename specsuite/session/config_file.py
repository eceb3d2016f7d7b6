"""A RunConfig as a JSON file: how `specsuite run` hands each child pytest session its settings.

The parent writes the typed configuration it built (every suite's section, the server, the seed, where results go)
and passes the file by one option, `--specsuite-config PATH`; the child reads it back into an equal RunConfig
instead of parsing every setting again from its command line, so a value the parent checked once (the server URL,
the comma lists) reaches the child as the value it checked.

The API keys are never written: the child reads them from its environment, as any session does. The file is
readable by its owner only, since a --results-db URL given through --pytest-arg may hold a password.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any

from specsuite.config.option import DECODE
from specsuite.errors import SpecsuiteError
from specsuite.server.session import ServerOptions
from specsuite.session.config import SECTION, RunConfig, family_sections

CONFIG_FILE_OPTION = "--specsuite-config"
SECRET_FIELDS = ("api_key", "admin_api_key")  # ServerOptions' keys: from the child's environment, never from the file


def config_to_json(config: RunConfig) -> str:
    """The configuration as JSON text (floats exactly, infinity as `Infinity`), without the API keys."""
    values = dataclasses.asdict(config)
    for name in SECRET_FIELDS:
        values["server"].pop(name)
    values.update(values.pop("families"))  # each family's section under its own name, beside RunConfig's fields
    return json.dumps(values, indent=2) + "\n"


def _decoded(cls: type, values: dict[str, Any], where: str) -> Any:
    """`cls` from its JSON object: sections recursively, lists as tuples, a field's own decoder where it has one."""
    known = {item.name: item for item in dataclasses.fields(cls)}
    unknown = sorted(set(values) - set(known))
    if unknown:
        raise SpecsuiteError(f"{where}: unknown setting(s) {', '.join(unknown)}: the file is from another specsuite version")
    built = {}
    for name, value in values.items():
        item = known[name]
        if SECTION in item.metadata:
            built[name] = _decoded(item.metadata[SECTION], value, f"{where} {name}")
        elif DECODE in item.metadata and value is not None:
            built[name] = item.metadata[DECODE](value)
        else:
            built[name] = tuple(value) if isinstance(value, list) else value
    return cls(**built)


def config_from_json(text: str, *, where: str = "run configuration", api_key: str | None = None,
                     admin_api_key: str | None = None) -> RunConfig:
    """The RunConfig a file of `config_to_json` holds, with the API keys given here."""
    try:
        values = json.loads(text)
    except ValueError as exc:
        raise SpecsuiteError(f"{where} is not JSON: {exc}") from None
    server = _decoded(ServerOptions, values.pop("server", {}), f"{where} server")
    built = {name: _decoded(cls, values.pop(name), f"{where} {name}") for name, cls in family_sections().items() if name in values}
    config = dataclasses.replace(_decoded(RunConfig, values, where), **built)
    return dataclasses.replace(config, server=dataclasses.replace(server, api_key=api_key, admin_api_key=admin_api_key))


def write_config_file(config: RunConfig, path: Path) -> Path:
    """Write the configuration for a child session (owner-only: it may hold a database URL with its password)."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        handle.write(config_to_json(config))
    return path


def read_config_file(path: str | Path, *, api_key: str | None = None, admin_api_key: str | None = None) -> RunConfig:
    """The RunConfig of a file `write_config_file` wrote; one line naming the option when it cannot be read."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise SpecsuiteError(f"{CONFIG_FILE_OPTION} {path}: {exc.strerror or exc}") from None
    return config_from_json(text, where=f"{CONFIG_FILE_OPTION} {path}", api_key=api_key, admin_api_key=admin_api_key)
