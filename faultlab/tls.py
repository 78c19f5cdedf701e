"""The lab's certificate authority: one per user (or per folder), issuing server certificates; and
the variables that make a client trust a CA.

The official SDK only speaks wss://, so the emulator (and later the proxy) serve certificates this
CA issued, and clients trust it through `SSL_CERT_FILE`. Keys are EC P-256 (fast to make and to
handshake); the CA is made once and reused, leaf certificates are cached by the names they cover.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import ipaddress
import os
import ssl
from collections.abc import Iterable
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from faultlab.errors import LabError
from faultlab.private import PRIVATE_DIR, write_private
from faultlab.protocols import PROTOCOLS, Service

# The names the real services answer on, and this machine's; certificates cover them by default.
SERVICE_NAMES = (*(n for p in PROTOCOLS.values() for n in p.service.certificate_names), "localhost")
LOOPBACK_IPS = ("127.0.0.1", "::1")
# Where runtimes look for the CA certificates to trust: Python's ssl (so httpx and websockets),
# requests, Node (which adds them to its own).
TRUST_VARIABLES = ("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "NODE_EXTRA_CA_CERTS")


def default_ca_dir() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "faultlab" / "ca"


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


class LabCA:
    """A certificate authority kept in `directory` (`ca.pem`, `ca.key`, issued leaves)."""

    def __init__(self, directory: Path | None = None) -> None:
        self.directory = directory or default_ca_dir()
        self.cert_path = self.directory / "ca.pem"
        self._key_path = self.directory / "ca.key"
        if not (self.cert_path.exists() and self._key_path.exists()):
            self._create()
        self._cert = x509.load_pem_x509_certificate(self.cert_path.read_bytes())
        key = serialization.load_pem_private_key(self._key_path.read_bytes(), password=None)
        assert isinstance(key, ec.EllipticCurvePrivateKey)
        self._key = key

    def _create(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True, mode=PRIVATE_DIR)
        key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "faultlab lab CA"),
                          x509.NameAttribute(NameOID.ORGANIZATION_NAME, "faultlab")])
        now = dt.datetime.now(dt.UTC)
        cert = (
            x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(days=1))
            .not_valid_after(now + dt.timedelta(days=3650))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                         content_commitment=False, key_encipherment=False,
                                         data_encipherment=False, key_agreement=False,
                                         encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()),
                           critical=False)
            .sign(key, hashes.SHA256())
        )
        write_private(self._key_path, _pem_key(key))
        tmp = self.cert_path.with_suffix(".tmp")
        tmp.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        tmp.replace(self.cert_path)

    def issue(self, names: Iterable[str] = SERVICE_NAMES,
              ips: Iterable[str] = LOOPBACK_IPS) -> tuple[Path, Path]:
        """A server certificate and key (PEM paths) for these DNS names and IP addresses."""
        names, ips = sorted(set(names)), sorted(set(ips))
        tag = hashlib.sha256(("|".join(names) + "#" + "|".join(ips)).encode()).hexdigest()[:16]
        cert_path = self.directory / f"server-{tag}.pem"
        key_path = self.directory / f"server-{tag}.key"
        if cert_path.exists() and key_path.exists():
            return cert_path, key_path
        key = ec.generate_private_key(ec.SECP256R1())
        now = dt.datetime.now(dt.UTC)
        alt: list[x509.GeneralName] = [x509.DNSName(n) for n in names]
        alt += [x509.IPAddress(ipaddress.ip_address(i)) for i in ips]
        cert = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0] if names
                                                        else "faultlab")]))
            .issuer_name(self._cert.subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(days=1))
            .not_valid_after(now + dt.timedelta(days=365))
            .add_extension(x509.SubjectAlternativeName(alt), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(self._key.public_key()),
                           critical=False)
            .sign(self._key, hashes.SHA256())
        )
        write_private(key_path, _pem_key(key))
        cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        return cert_path, key_path

    def server_context(self, names: Iterable[str] = SERVICE_NAMES,
                       ips: Iterable[str] = LOOPBACK_IPS) -> ssl.SSLContext:
        """A TLS server context presenting a certificate for these names."""
        cert, key = self.issue(names, ips)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.load_cert_chain(cert, key)
        if keylog := os.environ.get("SSLKEYLOGFILE"):
            # Session keys for Wireshark/tshark, as Python's default contexts would write them.
            ctx.keylog_filename = keylog
        return ctx

    def mitmproxy_confdir(self, confdir: Path) -> Path:
        """A mitmproxy configuration folder whose CA is this one (`mitmproxy-ca.pem`: key + cert)."""
        confdir.mkdir(parents=True, exist_ok=True, mode=PRIVATE_DIR)
        cert = self.cert_path.read_bytes()
        write_private(confdir / "mitmproxy-ca.pem", self._key_path.read_bytes() + cert)
        (confdir / "mitmproxy-ca-cert.pem").write_bytes(cert)
        return confdir


def system_ca_bundle() -> Path | None:
    """The system's CA bundle (Debian's /etc/ssl/certs/ca-certificates.crt), as OpenSSL finds it."""
    paths = ssl.get_default_verify_paths()
    for name in (paths.cafile, paths.openssl_cafile):
        if name and Path(name).is_file():
            return Path(name)
    return None


def write_trust_bundle(path: Path, extra: Iterable[Path]) -> Path:
    """A PEM bundle at `path`: the system's CAs and the `extra` CA certificates (a lab's, a
    remote service's), for a program that trusts one file (`SSL_CERT_FILE`, mitmproxy's upstream
    verification, which would otherwise use certifi's bundle rather than the system's)."""
    system = system_ca_bundle()
    parts = [system.read_bytes()] if system is not None else []
    for pem in extra:
        parts += [cert.public_bytes(serialization.Encoding.PEM) for cert in ca_certificates(pem)]
    path.write_bytes(b"\n".join(p.rstrip(b"\n") + b"\n" for p in parts))
    return path


def ca_certificates(pem: Path) -> list[x509.Certificate]:
    """The certificates of a PEM file given as a CA (a remote's `ca`), refusing one that holds a
    private key: its certificates alone go into bundles others can read."""
    try:
        data = pem.read_bytes()
    except OSError as exc:
        raise LabError(f"cannot read the CA certificate {pem}: {exc.strerror or exc}") from None
    if b"PRIVATE KEY-----" in data:
        raise LabError(f"{pem} holds a private key: give the CA's certificate alone")
    try:
        return x509.load_pem_x509_certificates(data)
    except ValueError:
        raise LabError(f"{pem} is not a PEM CA certificate") from None


def trust_environment(ca_path: str) -> dict[str, str]:
    """The variables that make a client's runtimes trust the CAs in `ca_path` (a PEM file)."""
    return dict.fromkeys(TRUST_VARIABLES, ca_path)


def client_environment(ca_path: str, base_url: str, service: Service) -> dict[str, str]:
    """What an unmodified SDK client of `service` needs in its environment to reach the emulator
    at `base_url`, whose certificate the CA in `ca_path` issued."""
    return {**trust_environment(ca_path),
            **dict.fromkeys(service.base_url_variables, base_url + service.base_path)}
