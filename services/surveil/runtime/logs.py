"""Structured logs: one JSON object per line on stderr, with the service name on every line.

The project logs through structlog. The libraries under it (kafka-python, aiokafka, faust and
mode) log through the standard library's ``logging``: its root handler renders their records
with structlog's ``ProcessorFormatter`` into the same JSON (``event``, ``level``,
``timestamp``, ``service``, and ``logger``: the library's logger name). faust's worker sets up
logging again when it starts; ``logging_config`` is what it is given to set up
(``anomaly_detection/app.py``), so its lines stay JSON too.
"""

from __future__ import annotations

import logging
import logging.config
import sys
from typing import Any

import structlog
from structlog.typing import EventDict, Processor, WrappedLogger

# What a line carries before it is rendered, ours and the libraries' alike.
_SHARED: list[Processor] = [
    structlog.contextvars.merge_contextvars,
    structlog.processors.add_log_level,
    structlog.processors.TimeStamper(fmt="iso", utc=True),
]


def configure(service: str, level: str = "INFO") -> structlog.stdlib.BoundLogger:
    logging.config.dictConfig(logging_config(service, level))
    structlog.configure(
        processors=[*_SHARED, structlog.processors.format_exc_info, structlog.processors.JSONRenderer()],
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelName(level)),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
        cache_logger_on_first_use=True,
    )
    return structlog.get_logger().bind(service=service)  # type: ignore[no-any-return]


def logging_config(service: str, level: str = "INFO") -> dict[str, Any]:
    """The standard library's logging as ``logging.config.dictConfig`` takes it: every record as
    a JSON line on stderr, as structlog renders the project's own."""
    return {
        "version": 1,
        "disable_existing_loggers": False,  # the libraries' loggers exist already, and must keep logging
        "formatters": {"json": {"()": json_formatter, "service": service}},
        "handlers": {"stderr": {"class": "logging.StreamHandler", "stream": "ext://sys.stderr", "formatter": "json"}},
        "root": {"level": level, "handlers": ["stderr"]},
        # kafka-python warns "Exchanging credentials in the clear" at every SCRAM login over
        # SASL_PLAINTEXT; SCRAM sends a salted proof, never the password (docs/security.md).
        "loggers": {"kafka.net.sasl.scram": {"level": "ERROR"}},
    }


def json_formatter(service: str) -> logging.Formatter:
    """A ``logging`` formatter that renders a record as the project's JSON line."""

    def add_service(logger: WrappedLogger, method: str, event: EventDict) -> EventDict:
        event.setdefault("service", service)
        return event

    return structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=[*_SHARED, structlog.stdlib.add_logger_name, add_service],
        processors=[
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            structlog.processors.format_exc_info,
            structlog.processors.JSONRenderer(),
        ],
    )
