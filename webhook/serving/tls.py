"""TLS for the server: TLS 1.2 at least, optionally clients authenticated by a CA of their own
(`--client-ca`: the API server presents the certificate an AdmissionConfiguration gives it), and
certificate files picked up when they change on disk.

gunicorn asks its `ssl_context` hook for a context on every new connection; this one answers
from a cache keyed by the files' identity, so a renewed certificate serves the next handshake
while connections already open keep theirs. A half-written pair keeps the old context.
"""

from __future__ import annotations

import logging
import os
import ssl
import threading

log = logging.getLogger("gpu_admission.tls")


def server_context(cert_file: str, key_file: str, client_ca: str | None = None) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(cert_file, key_file)
    context.set_alpn_protocols(["http/1.1"])
    if client_ca:
        context.verify_mode = ssl.CERT_REQUIRED
        context.load_verify_locations(cafile=client_ca)
    return context


class ReloadingContext:
    def __init__(self, cert_file: str, key_file: str, client_ca: str | None = None) -> None:
        self.cert_file = cert_file
        self.key_file = key_file
        self.client_ca = client_ca
        self._lock = threading.Lock()
        self._stamp = self._identity()
        self._context = server_context(cert_file, key_file, client_ca)
        self.reloads = 0

    def _identity(self) -> tuple[tuple[int, int, int], ...]:
        files = (self.cert_file, self.key_file, *((self.client_ca,) if self.client_ca else ()))
        return tuple((s.st_ino, s.st_mtime_ns, s.st_size) for s in map(os.stat, files))

    def get(self) -> ssl.SSLContext:
        try:
            stamp = self._identity()
        except OSError:
            return self._context
        if stamp == self._stamp:
            return self._context
        with self._lock:
            if stamp != self._stamp:
                try:
                    self._context = server_context(self.cert_file, self.key_file, self.client_ca)
                    self._stamp = stamp
                    self.reloads += 1
                    log.info("serving certificate reloaded", extra={"fields": {"cert": self.cert_file}})
                except (ssl.SSLError, OSError) as error:
                    log.warning(
                        "new certificate files unusable, keeping the old ones", extra={"fields": {"error": str(error)}}
                    )
        return self._context
