"""The world's mail provider: what Redmine sends over SMTP inside its boundary is taken by statekit's
``SmtpService`` and kept in the world's ``statekit_outbox`` table, one row per message, so the mail a
step sent is rewound and digested with the rest of the world."""

from __future__ import annotations

import psycopg

from statekit.kit import Mail


class Outbox:
    """Keeps each message in the world at ``conninfo``. Its connection is re-opened when a rewind has
    ended it (a rewind ends every connection of the world)."""

    def __init__(self, conninfo: str) -> None:
        self.conninfo = conninfo
        self._conn: psycopg.Connection | None = None

    def keep(self, mail: Mail) -> None:
        """``SmtpService``'s ``deliver``: one row for ``mail``."""
        message = mail.message
        body = message.get_body(("plain",))
        row = {
            "message_id": str(message.get("Message-ID", "")).strip("<>"),
            "sender": mail.sender,
            "recipients": ", ".join(sorted(mail.recipients)),
            "subject": str(message.get("Subject", "")),
            "sent": str(message.get("Date", "")),
            "body": body.get_content() if body is not None else "",
        }
        for attempt in (1, 2):
            try:
                conn = self._connection()
                conn.execute(
                    "INSERT INTO statekit_outbox (message_id, sender, recipients, subject, sent, body) "
                    "VALUES (%(message_id)s, %(sender)s, %(recipients)s, %(subject)s, %(sent)s, %(body)s)",
                    row,
                )
                return
            except psycopg.OperationalError:
                self.close()
                if attempt == 2:
                    raise

    def _connection(self) -> psycopg.Connection:
        if self._conn is None or self._conn.closed:
            self._conn = psycopg.connect(self.conninfo, autocommit=True)
        return self._conn

    def close(self) -> None:
        """Close its connection. Safe to call twice."""
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()
