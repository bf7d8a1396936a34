"""Structured JSON logs, one object a line, with the review's fields when there is one and the whole
traceback when there is one; gunicorn's own messages go out in the same form (JsonGunicornLogger)."""

from __future__ import annotations

import logging
import sys
import time

import orjson


class JsonFormatter(logging.Formatter):
    _stamp = (-1, "")  # one tuple, so threads never see one second's number with another's text

    def _time(self, record: logging.LogRecord) -> str:
        second, text = self._stamp
        if int(record.created) != second:  # a log line per review: strftime once a second is plenty
            second = int(record.created)
            text = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
            self._stamp = (second, text)
        return f"{text}.{int(record.msecs):03d}Z"

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "time": self._time(record),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            entry.update(fields)
        if record.exc_info:
            # The whole traceback, inside the line: a log shipper keeps one JSON object per line.
            text = self.formatException(record.exc_info)
            entry["error"] = text.splitlines()[-1]
            entry["traceback"] = text
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        return orjson.dumps(entry, default=str).decode()


def configure(level: str = "INFO") -> None:
    # A line per review: skip what each record would look up and these lines never show (the
    # logging HOWTO's "Optimization" settings): the caller's frame, thread, process names.
    logging._srcfile = None
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger("gpu_admission")
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    root.propagate = False


def json_handlers(logger: logging.Logger) -> None:
    """Every handler of `logger` writes JSON lines (gunicorn's loggers, once gunicorn set them up)."""
    for handler in logger.handlers:
        handler.setFormatter(JsonFormatter())
