"""The command-line options of the executors: ``--executor NAME --executor-opt KEY=VALUE``.

The argparse half of :mod:`probekit.executor`, imported by the CLI modules only (the ``cli``
import contract of ``pyproject.toml``): :func:`add_executor_arguments` adds the options and
every registered backend's alias flags (:class:`~probekit.executor.CliAlias`) to a parser,
:func:`executor_choice` reads them back as ``(name, options)`` and :func:`executor_from_args`
builds (and connects) the executor.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from .errors import ConfigError
from .executor import EXECUTORS, Executor, available_executors, make_executor

__all__ = ["add_executor_arguments", "executor_choice", "executor_from_args", "parse_executor_opts"]


def add_executor_arguments(parser: Any) -> None:
    """Add ``--executor``, ``--executor-opt KEY=VALUE`` and the backends' aliases to a parser."""
    parser.add_argument(
        "--executor", default=None,
        help=f"runs the independent tasks: one of {available_executors()} (default: inprocess; "
        "a suite's [execution] table)",
    )
    parser.add_argument(
        "--executor-opt", dest="executor_opt", action="append", default=[], metavar="KEY=VALUE",
        help="an option of the executor (repeatable; values parsed as JSON when possible), e.g. "
        "--executor-opt max_retries=5; replaces a suite's [execution.options]",
    )
    for name in available_executors():
        for alias in EXECUTORS.get(name).aliases:
            parser.add_argument(alias.flag, dest=alias.dest, default=None, metavar=alias.metavar,
                                type=alias.parse, help=f"{alias.help} (= --executor {name} "
                                f"--executor-opt {alias.option}=VALUE)")


def parse_executor_opts(items: Iterable[str]) -> dict[str, Any]:
    """``["address=auto", "num_cpus=4"]`` -> ``{"address": "auto", "num_cpus": 4}`` (JSON values)."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--executor-opt {item!r} is not KEY=VALUE (e.g. --executor-opt "
                              "max_retries=5)")
        try:
            out[key.strip()] = json.loads(raw)
        except json.JSONDecodeError:
            out[key.strip()] = raw
    return out


def executor_choice(args: Any) -> tuple[str, dict[str, Any]] | None:
    """``(name, options)`` of ``--executor`` / ``--executor-opt`` / a backend's alias flags.

    ``None`` when none is given. An alias implies its backend; an alias of another backend than
    ``--executor`` names is an error. The options are not validated here
    (:func:`executor_options` does it).

    Raises:
        ConfigError: an alias given with another executor, ``--executor-opt`` without an
            executor, or a malformed ``KEY=VALUE``.
    """
    options = parse_executor_opts(getattr(args, "executor_opt", None) or [])
    given = [(name, alias, getattr(args, alias.dest)) for name in available_executors()
             for alias in EXECUTORS.get(name).aliases if getattr(args, alias.dest, None) is not None]
    chosen = getattr(args, "executor", None)
    if chosen is None and not given:
        if options:
            raise ConfigError("--executor-opt given without --executor; name the executor, e.g. "
                              f"--executor {available_executors()[-1]}")
        return None
    name = chosen if chosen is not None else given[0][0]
    for backend, alias, value in given:
        if backend != name:
            raise ConfigError(f"{alias.flag} {value!r} given with --executor {name!r}; use "
                              f"--executor {backend} (or drop {alias.flag})")
        options.setdefault(alias.option, value)
    return name, options


def executor_from_args(args: Any, *, progress: bool | None = None) -> Executor | None:
    """The executor of :func:`add_executor_arguments`' options (None when none is given), connected.

    An executor with a ``connect()`` method (a cluster client) connects here, so an unreachable
    cluster fails before any model loads.

    Raises:
        ConfigError: an unknown executor or option, or an alias of another executor.
    """
    choice = executor_choice(args)
    if choice is None:
        return None
    out = make_executor(*choice, progress=progress)
    connect = getattr(out, "connect", None)
    if connect is not None:
        connect()
    return out
