"""The GPU_ADMISSION_* settings the process reads from its environment, and what each must be (one
table): a bad value is one clear line and exit 2 at start, never a traceback from deep inside
gunicorn."""

from __future__ import annotations

import sys
from collections.abc import Mapping

# What each setting must be; read where it is used, checked here all at once at start.
WHOLE = ("GPU_ADMISSION_THREADS", "GPU_ADMISSION_CONNECTIONS")
POSITIVE = ("GPU_ADMISSION_READ_TIMEOUT", "GPU_ADMISSION_CERT_SYNC_SECONDS")
NON_NEGATIVE = ("GPU_ADMISSION_AUDIT_SECONDS",)  # 0: the background audit off
BOOLEAN = (
    "GPU_ADMISSION_FAIL_OPEN",
    "GPU_ADMISSION_ALL_NAMESPACES",
    "GPU_ADMISSION_LABELLED_NAMESPACES",
    "GPU_ADMISSION_MANAGE_CERTS",
)
LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if value == value and value not in (float("inf"), float("-inf")) else None


def host_port(bind: str) -> tuple[str, int]:
    """host:port (an empty host: every address); ValueError says what is wrong."""
    host, sep, port = bind.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{bind!r} is not host:port")
    return host.strip("[]"), int(port)


def environment_problems(env: Mapping[str, str]) -> list[str]:
    """One line per GPU_ADMISSION_* setting that is set to something the server cannot use."""
    problems = []
    for name in WHOLE:
        if name in env and not (env[name].isdigit() and int(env[name]) > 0):
            problems.append(f"{name}={env[name]!r} is not a positive whole number")
    for name in POSITIVE:
        if name in env and not ((_number(env[name]) or 0) > 0):
            problems.append(f"{name}={env[name]!r} is not a positive number")
    for name in NON_NEGATIVE:
        value = _number(env[name]) if name in env else 0.0
        if value is None or value < 0:
            problems.append(f"{name}={env[name]!r} is not a number of seconds, 0 or more")
    for name in BOOLEAN:
        if name in env and env[name] not in ("true", "false"):
            problems.append(f"{name}={env[name]!r} is not true or false")
    bind = env.get("GPU_ADMISSION_METRICS_BIND")
    if bind:
        try:
            host_port(bind)
        except ValueError as error:
            problems.append(f"GPU_ADMISSION_METRICS_BIND={error}")
    level = env.get("GPU_ADMISSION_LOG_LEVEL")
    if level is not None and level.upper() not in LEVELS:
        problems.append(f"GPU_ADMISSION_LOG_LEVEL={level!r} is not one of {', '.join(LEVELS)}")
    return problems


def require_valid_environment(env: Mapping[str, str]) -> None:
    """Every problem of the environment on a line of its own, then exit 2; nothing when it is sound."""
    problems = environment_problems(env)
    for problem in problems:
        print(f"error: {problem}", file=sys.stderr)
    if problems:
        raise SystemExit(2)


def number(env: Mapping[str, str], name: str, default: str) -> float:
    """A numeric setting, held to its rule in the table above (one line and exit 2 if it breaks it)."""
    require_valid_environment({name: env[name]} if name in env else {})
    return float(env.get(name, default))
