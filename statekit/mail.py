"""A mail provider answered inside an application process's boundary: the process sends e-mail over
SMTP to a port of its own loopback (``AppProcess(services=...)``), and statekit's SMTP server
(aiosmtpd) takes each message there and hands it to the adapter, which keeps it in the world.

An application that sends mail reaches a third party. Behind the boundary there is no route to one, so
the provider's side of the conversation is played here: the greeting, the replies, the acceptance of
each message. What the application sent is then part of what an episode did (a task can require the
reporter to be told), written where the adapter says, usually a table of the world, so rewinds and the
digest cover it like any row. Switching the boundary's network off lets the mail leave for whatever
answers on the machine's own port, and the world's mailbox stays empty: that difference is how
``statekit check`` proves the egress control for such an application.
"""

from __future__ import annotations

import asyncio
import email.policy
import logging
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass
from email.message import EmailMessage
from typing import Any

from statekit.errors import ConfigError

HOSTNAME = "mail.statekit.invalid"
"""The name the provider greets with (``.invalid``: no real host has it)."""
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Mail:
    """One message as the provider took it: the envelope, and the message parsed."""

    sender: str
    recipients: tuple[str, ...]
    message: EmailMessage


class SmtpService:
    """An SMTP server on ``listener`` (a listening TCP socket, usually ``AppProcess.listener(port)``)
    calling ``deliver`` with each message, in the order they come, on its own thread; ``close`` stops
    it. A ``deliver`` that raises refuses the message (451), so the sender sees a failed delivery."""

    def __init__(self, listener: socket.socket, deliver: Callable[[Mail], None]) -> None:
        try:
            from aiosmtpd.smtp import SMTP
        except ImportError as exc:
            raise ConfigError("a mail provider needs aiosmtpd: pip install 'statekit[mail]'") from exc
        self._deliver = deliver
        self._loop = asyncio.new_event_loop()
        listener.setblocking(False)
        serving = self._loop.create_server(
            lambda: SMTP(self, hostname=HOSTNAME, ident="statekit"), sock=listener
        )
        try:
            self._server = self._loop.run_until_complete(serving)
        except BaseException:
            self._loop.close()
            raise
        self._thread = threading.Thread(target=self._loop.run_forever, name="statekit-smtp", daemon=True)
        self._thread.start()

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        """aiosmtpd's hook (its name): one message, whole."""
        message = email.message_from_bytes(envelope.content, policy=email.policy.default)
        assert isinstance(message, EmailMessage)
        try:
            self._deliver(Mail(str(envelope.mail_from), tuple(envelope.rcpt_tos), message))
        except Exception as exc:
            log.exception("the mail provider could not keep a message")
            return f"451 4.3.0 not kept: {type(exc).__name__}"
        return "250 2.0.0 OK"

    def close(self) -> None:
        """Stop serving (the listening socket is closed with it). Safe to call twice."""
        if self._loop.is_closed():
            return
        self._loop.call_soon_threadsafe(self._server.close)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        if self._thread.is_alive():  # a delivery still running: its loop is left to the daemon thread
            log.warning("the mail provider did not stop within 10 s")
            return
        self._loop.close()

    def __enter__(self) -> SmtpService:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
