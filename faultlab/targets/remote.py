"""A service outside the lab as the target (the real Live API), reached through the router's
uplink (`faultlab.lab.uplink`), with the uplink's DNS.

The client resolves the service's `host` with DNS, or to a pinned `address`; the trust it needs
is the system's CAs, the service's own `ca` and, through the proxy, the run's CA.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Collection, Mapping, Sequence
from ipaddress import IPv4Address, IPv4Network
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from pydantic import Field, field_validator

from faultlab.errors import LabError
from faultlab.lab import uplink
from faultlab.lab.uplink import UplinkSpec
from faultlab.model import Model, host_name
from faultlab.protocols import DEFAULT, PROTOCOLS
from faultlab.protocols import Protocol as RealtimeApi
from faultlab.targets.base import Surroundings, TargetKind

if TYPE_CHECKING:
    from faultlab.lab.base import Lab
    from faultlab.problems import Loc

# The `address` that names this machine's own 127.0.0.1 (`uplink.HOST_LOOPBACK` from the lab).
HOST_LOOPBACK_NAME = "host-loopback"


class RemoteTarget(Model):
    """A service outside the lab (the real Live API), reached through the router's uplink: the
    client resolves `host` with DNS, or to `address` when given (`host-loopback`: a service on
    this machine's 127.0.0.1, standing in for a remote one); `ca` is a CA certificate (PEM) that
    issued the service's certificate, trusted beside the system's; `protocol` is the realtime
    API it speaks (faultlab.protocols), which names the messages in the proxy's frame log."""

    host: str
    """The service's host name (`generativelanguage.googleapis.com`), which the client resolves
    with the uplink's DNS, or to `address`."""
    port: int = Field(default=443, ge=1, le=65535)
    """The service's port, which the client connects to."""
    address: str | None = None
    """Pins `host` to this IPv4 address (in the client's /etc/hosts) instead of DNS;
    `host-loopback`: this machine's own 127.0.0.1, for a stand-in service on this machine."""
    ca: Path | None = None
    """A CA certificate (PEM) that issued the service's certificate (a staging endpoint, a
    stand-in), trusted by the proxy and the client beside the system's; relative to the
    profile's folder."""
    protocol: str = DEFAULT.name
    """The realtime API the service speaks (`gemini`, `openai`), which names the messages in the
    proxy's frame log for frame triggers, message faults and expectations."""

    @field_validator("protocol")
    @classmethod
    def _known(cls, name: str) -> str:
        if name not in PROTOCOLS:
            raise ValueError(f"{name!r}: one of {', '.join(sorted(PROTOCOLS))}")
        return name

    @field_validator("host")
    @classmethod
    def _host_name(cls, name: str) -> str:
        return host_name(name)

    @field_validator("address")
    @classmethod
    def _address(cls, value: str | None) -> str | None:
        if value is None or value == HOST_LOOPBACK_NAME:
            return value
        try:
            address = ipaddress.IPv4Address(value)
        except ValueError:
            raise ValueError(f"{value!r}: an IPv4 address, or {HOST_LOOPBACK_NAME!r}") from None
        if address.is_loopback:
            raise ValueError(f"{value}: the lab has its own loopback; a service on this "
                             f"machine's is {HOST_LOOPBACK_NAME!r}")
        return value

    @property
    def uses_host_loopback(self) -> bool:
        return self.address == HOST_LOOPBACK_NAME

    @property
    def pinned_address(self) -> str | None:
        """The address its name is pinned to in the lab, if any."""
        return str(uplink.HOST_LOOPBACK) if self.uses_host_loopback else self.address


class Remote(TargetKind):
    """The service at `remote`; the target's other fields are for programs the lab runs."""

    name: ClassVar[str] = "remote"
    in_lab: ClassVar[bool] = False

    def __init__(self, remote: RemoteTarget, given: Mapping[str, object]) -> None:
        self.remote = remote
        # The target's fields beside `remote` (image, port, args, env, pass_env), as given.
        self.given = given

    @property
    def listen_port(self) -> int:
        return self.remote.port

    def misfit(self) -> str | None:
        extra = [k for k, v in self.given.items() if v]
        if extra:
            return (f"a remote target runs nothing in the lab: its port goes in 'remote', and it "
                    f"takes no {extra[0]!r}")
        return None

    @property
    def protocol(self) -> RealtimeApi:
        return PROTOCOLS[self.remote.protocol]

    def address(self, lab: Lab) -> str | None:
        return self.remote.pinned_address

    def host(self, lab: Lab) -> str:
        return self.remote.host

    def client_names(self) -> list[str]:
        # Pinned, its name resolves to the address; else the client asks DNS for it.
        return [self.remote.host] if self.remote.address else []

    def dns_names(self) -> list[str]:
        # Pinned or not, the client looks the service up by its name.
        return [self.remote.host]

    def client_env(self, run: Surroundings, proxied: bool) -> dict[str, str]:
        from faultlab.tls import trust_environment, write_trust_bundle

        extra = [run.ca.cert_path] if proxied else []
        extra += self._own_ca(run)
        if not extra:
            return {}
        return trust_environment(str(write_trust_bundle(run.run_dir / "trust.pem", extra)))

    def resolver(self) -> IPv4Address | None:
        # Real names resolve with the uplink's DNS (the host's resolver).
        return uplink.DNS

    def upstream_ca(self, run: Surroundings) -> Path | None:
        from faultlab.tls import write_trust_bundle

        return write_trust_bundle(run.run_dir / "upstream-trust.pem", self._own_ca(run))

    @property
    def uplink(self) -> UplinkSpec | None:
        return UplinkSpec(host_loopback=self.remote.uses_host_loopback)

    def _own_ca(self, run: Surroundings) -> list[Path]:
        return [] if self.remote.ca is None else [run.profile_path(self.remote.ca)]

    def profile_problems(self, hosts: Sequence[str], sysctl: Collection[str],
                         subnets: Mapping[str, IPv4Network], folder: Path) -> list[tuple[Loc, str]]:
        """The names in `hosts` need an address to resolve to, there is no server namespace to
        set, the lab's subnets leave room for the uplink's, and the CA is a readable
        certificate."""
        problems: list[tuple[Loc, str]] = []
        if self.remote.address is None and hosts:
            problems.append((("hosts",), "the names in 'hosts' resolve to the target's address: "
                             "give the remote target an 'address' (without one, the client asks "
                             "DNS)"))
        if "server" in sysctl:
            problems.append((("network", "sysctl", "server"), "a remote target runs outside the "
                             "lab: there is no server namespace to set"))
        for side, subnet in subnets.items():
            if subnet.overlaps(uplink.NETWORK):
                problems.append((("network", "subnets", side), f"the uplink to a remote target "
                                 f"uses {uplink.NETWORK}: pick a subnet outside it"))
        if self.remote.ca is not None:
            # Here, not at the top: checking a profile does not load the TLS stack otherwise.
            from faultlab.tls import ca_certificates

            try:
                ca_certificates(folder / self.remote.ca)
            except LabError as exc:
                problems.append((("target", "remote", "ca"), str(exc)))
        return problems
