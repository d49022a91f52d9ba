"""A throwaway certificate authority for the benchmark's HTTPS upstream.

``make_tls(directory)`` writes ``ca.pem`` (the CA certificate clients trust, e.g. through
``SSL_CERT_FILE``) and ``server.pem`` (private key + chain for ``127.0.0.1``, what
``mock_upstream.py --tls-cert`` serves). Made with ``trustme`` (the ``test`` extra) at bench
time, so no key ever lives in the repository.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True)
class TlsFiles:
    ca: Path
    server: Path


def make_tls(directory: Path) -> TlsFiles:
    import trustme  # only the HTTPS rows need it

    directory.mkdir(parents=True, exist_ok=True)
    ca = trustme.CA()
    leaf = ca.issue_cert("127.0.0.1", "localhost")
    files = TlsFiles(directory / "ca.pem", directory / "server.pem")
    ca.cert_pem.write_to_path(str(files.ca))
    leaf.private_key_and_cert_chain_pem.write_to_path(str(files.server))
    return files
