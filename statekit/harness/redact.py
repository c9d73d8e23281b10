"""Secrets never reach the server's log: the access log prints request targets, query strings included.

The guard refuses a token sent as ``?token=...`` (it reads only the ``Authorization`` header), but
uvicorn's access log would still print it, and logs travel further than secrets should. A logging
filter rewrites every record of uvicorn's loggers before it is formatted: the values of query
parameters whose names say "credential" become ``[redacted]``, and so does the server's own token
wherever it appears (a path segment, an encoded form).
"""

from __future__ import annotations

import logging
import re
from urllib.parse import quote

SECRET_PARAMETERS = (
    "access_token",
    "api_key",
    "apikey",
    "auth",
    "authorization",
    "client_secret",
    "key",
    "password",
    "secret",
    "signature",
    "token",
)
REDACTED = "[redacted]"
LOGGERS = ("uvicorn.access", "uvicorn.error")
_NAMES = "|".join(SECRET_PARAMETERS)
_PARAMETER = re.compile(rf"(?P<name>(?:^|(?<=[?&;]))(?:{_NAMES})=)(?P<value>[^&;#\s\"']*)", re.IGNORECASE)


def redact(text: str, secrets: tuple[str, ...] = ()) -> str:
    """``text`` with credential-named query values and every given secret replaced by ``[redacted]``."""
    for secret in secrets:
        for form in {secret, quote(secret, safe=""), quote(secret)}:
            text = text.replace(form, REDACTED)
    return _PARAMETER.sub(lambda m: m.group("name") + REDACTED, text)


class RedactSecrets(logging.Filter):
    """Rewrites a record's message arguments (uvicorn's access log passes the target as one)."""

    def __init__(self, secrets: tuple[str, ...] = ()) -> None:
        super().__init__()
        self.secrets = tuple(s for s in secrets if s)

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str):
            record.msg = redact(record.msg, self.secrets)
        if isinstance(record.args, tuple):
            record.args = tuple(redact(a, self.secrets) if isinstance(a, str) else a for a in record.args)
        return True


def install(token: str | None) -> RedactSecrets:
    """Attach the filter to uvicorn's loggers (after uvicorn configured logging, which replaces them)."""
    redactor = RedactSecrets((token,) if token else ())
    for name in LOGGERS:
        logger = logging.getLogger(name)
        for old in [f for f in logger.filters if isinstance(f, RedactSecrets)]:
            logger.removeFilter(old)
        logger.addFilter(redactor)
    return redactor
