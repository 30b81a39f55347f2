"""The detectors' alert-signing key (Ed25519): the private key signs every alert's chain value
and every checkpoint (``detect.alerts``), the public key is all ``surveil verify`` needs.

A key pair is two PEM files, made by ``surveil keys alert-signing --out DIR``: ``alert-signing.key``
(PKCS#8, ``0600``: anomaly-detection's ``ALERT_SIGNING_KEY``, and no one else's) and
``alert-signing.pub`` (for whoever verifies a log). A key's id is the first 16 hex digits of the
sha256 of its raw public key; each signature names it, so a log signed across a rotation verifies
with the old and the new public key together (docs/security.md, "Alert proof").
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

PRIVATE_FILE = "alert-signing.key"
PUBLIC_FILE = "alert-signing.pub"


def key_id(public: Ed25519PublicKey) -> str:
    raw = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return hashlib.sha256(raw).hexdigest()[:16]


class AlertSigner:
    """Signs as the detectors: ``sign(data) == "<key id>:<signature hex>"``."""

    def __init__(self, private: Ed25519PrivateKey) -> None:
        self.private = private
        self.key_id = key_id(private.public_key())

    @classmethod
    def from_file(cls, path: Path | str) -> AlertSigner:
        private = serialization.load_pem_private_key(Path(path).read_bytes(), password=None)
        if not isinstance(private, Ed25519PrivateKey):
            raise ValueError(f"{path}: not an Ed25519 private key")
        return cls(private)

    @classmethod
    def from_env(cls) -> AlertSigner | None:
        """The key ``ALERT_SIGNING_KEY`` names; None when it is not set."""
        path = os.environ.get("ALERT_SIGNING_KEY", "")
        return cls.from_file(path) if path else None

    def sign(self, data: bytes) -> str:
        return f"{self.key_id}:{self.private.sign(data).hex()}"

    @property
    def verifier(self) -> AlertVerifier:
        return AlertVerifier([self.private.public_key()])


class AlertVerifier:
    """Checks signatures with the detectors' public keys (several: across a rotation)."""

    def __init__(self, keys: Iterable[Ed25519PublicKey]) -> None:
        self.keys = {key_id(key): key for key in keys}

    @classmethod
    def from_files(cls, paths: Iterable[Path | str]) -> AlertVerifier:
        keys = []
        for path in paths:
            public = serialization.load_pem_public_key(Path(path).read_bytes())
            if not isinstance(public, Ed25519PublicKey):
                raise ValueError(f"{path}: not an Ed25519 public key")
            keys.append(public)
        return cls(keys)

    def problem(self, data: bytes, signature: str | None) -> str | None:
        """Why ``signature`` is not the detectors' signature of ``data``; None when it is."""
        if not signature:
            return "not signed"
        identity, _, value = signature.partition(":")
        key = self.keys.get(identity)
        if key is None:
            return f"signed with key {identity}, which is none of the detectors' keys given"
        try:
            key.verify(bytes.fromhex(value), data)
        except (InvalidSignature, ValueError):
            return "the signature does not match: altered, or not signed by the detectors"
        return None


def generate(folder: Path) -> str:
    """A new key pair in ``folder`` (made ``0700``; the private key ``0600``); its key id. Refuses
    to overwrite a pair there: keep the old public key to verify the logs it signed."""
    private_path, public_path = folder / PRIVATE_FILE, folder / PUBLIC_FILE
    for path in (private_path, public_path):
        if path.exists():
            raise FileExistsError(f"{path} exists: make the new pair elsewhere, and keep the old public key for the old logs")
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    private = Ed25519PrivateKey.generate()
    pem = private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    fd = os.open(private_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as file:
        file.write(pem)
    public = private.public_key()
    public_path.write_bytes(public.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    return key_id(public)
