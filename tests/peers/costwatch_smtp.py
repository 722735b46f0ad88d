"""An aiosmtpd handler for costwatch's email tests.

Load it with the aiosmtpd command line, the directory of this file on
PYTHONPATH:

    python -m aiosmtpd -n -l 127.0.0.1:PORT -c costwatch_smtp.ScriptedMailbox MAILDIR

It stores messages in MAILDIR like ``aiosmtpd.handlers.Mailbox`` and adds:

- recipients whose local part starts with ``reject`` get ``550`` (permanent),
  those starting with ``busy`` get ``451`` (transient);
- ``AUTH PLAIN`` succeeds only for the ``user:password`` in the environment
  variable ``COSTWATCH_PEER_SMTP_AUTH`` (aiosmtpd offers AUTH only after
  STARTTLS); the login of an authenticated session is stored in the message
  as ``X-Peer-Login``.
"""

import base64
import binascii
import os

from aiosmtpd.handlers import Mailbox
from aiosmtpd.smtp import AuthResult, LoginPassword


class ScriptedMailbox(Mailbox):
    async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
        local = address.split("@", 1)[0].lower()
        if local.startswith("reject"):
            return "550 5.1.1 mailbox unavailable"
        if local.startswith("busy"):
            return "451 4.3.0 mailbox busy, try again later"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def auth_PLAIN(self, server, args):
        expected = os.environ.get("COSTWATCH_PEER_SMTP_AUTH", "")
        if len(args) != 2 or ":" not in expected:
            return AuthResult(success=False, handled=False)
        try:
            decoded = base64.b64decode(args[1], validate=True)
        except (binascii.Error, ValueError):
            return AuthResult(success=False, handled=False)
        parts = decoded.split(b"\0")
        if len(parts) != 3:
            return AuthResult(success=False, handled=False)
        _authzid, login, password = parts
        user, _, secret = expected.partition(":")
        ok = login == user.encode() and password == secret.encode()
        return AuthResult(
            success=ok,
            handled=False,
            auth_data=LoginPassword(login, password) if ok else None,
        )

    def prepare_message(self, session, envelope):
        message = super().prepare_message(session, envelope)
        login = session.login_data
        if login:
            message["X-Peer-Login"] = login.decode() if isinstance(login, bytes) else str(login)
        return message
