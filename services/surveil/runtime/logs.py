"""Structured logs: one JSON object per line on stderr, with the service name on every line."""

from __future__ import annotations

import logging
import sys

import structlog


def configure(service: str, level: str = "INFO") -> structlog.stdlib.BoundLogger:
    logging.basicConfig(stream=sys.stderr, level=level, format="%(message)s")
    # kafka-python warns "Exchanging credentials in the clear" at every SCRAM login over
    # SASL_PLAINTEXT; SCRAM sends a salted proof, never the password (docs/security.md).
    logging.getLogger("kafka.net.sasl.scram").setLevel(logging.ERROR)
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            structlog.processors.JSONRenderer(),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelName(level)),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
        cache_logger_on_first_use=True,
    )
    return structlog.get_logger().bind(service=service)  # type: ignore[no-any-return]
