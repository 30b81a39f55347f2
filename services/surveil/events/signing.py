"""Device signatures: every shoe line and every console or sensor input carries an HMAC-SHA256 of
its bytes under its device's key, so a spoofed card read or bet is refused (and alerted on).

Each device has its own key, derived from the floor's secret (``DEVICE_KEY_SECRET``) and the
device's name: ``shoe/<table>`` for a card-reading shoe, ``console/<table>`` for a table's console
and bet sensors. A device is provisioned with its key alone; the services hold the secret.
Without ``DEVICE_KEY_SECRET`` nothing is signed or checked (a development floor), and the services
say so when they start.
"""

from __future__ import annotations

import hashlib
import hmac
import os

from . import topics

ENV = "DEVICE_KEY_SECRET"
HEADER = "signature"  # the Kafka record header of a signed input


def shoe_device(table_id: str) -> str:
    return f"shoe/{table_id}"


def console_device(table_id: str) -> str:
    return f"console/{table_id}"


# Topics whose records devices write, signed in the record header: the device, by the record key.
SIGNED_TOPICS = {topics.INPUTS: console_device}


class DeviceKeys:
    def __init__(self, secret: str) -> None:
        if not secret:
            raise ValueError(f"{ENV} is empty")
        self._secret = secret.encode()

    @classmethod
    def from_env(cls) -> DeviceKeys | None:
        secret = os.environ.get(ENV, "")
        return cls(secret) if secret else None

    def key(self, device: str) -> bytes:
        """The key a device is provisioned with."""
        return hmac.new(self._secret, device.encode(), hashlib.sha256).digest()

    def sign(self, device: str, payload: bytes) -> str:
        return hmac.new(self.key(device), payload, hashlib.sha256).hexdigest()

    def problem(self, device: str, payload: bytes, signature: str | None) -> str | None:
        """Why ``signature`` does not prove ``payload`` came from ``device``; None when it does."""
        if not signature:
            return f"no signature: every message of {device} must be signed"
        # A signature is hex: other text is no signature (and compare_digest refuses non-ASCII).
        if not signature.isascii() or not hmac.compare_digest(signature, self.sign(device, payload)):
            return f"the signature is not {device}'s: a spoofed or altered message"
        return None
