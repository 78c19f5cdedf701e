"""The realtime API services faultlab stands in for: the host names their SDKs reach by default,
what a certificate for them covers, and the variables that point an SDK at another endpoint.

One table, read by the emulator's certificates (`faultlab.tls`) and by the emulator target, whose
client resolves these names to the lab's server; a second protocol is one more entry.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Service:
    """A service an unmodified client reaches by its real names."""

    name: str
    # The names its SDKs connect to by default; the first is its default endpoint.
    hosts: tuple[str, ...]
    # What a certificate for it covers: its names, a wildcard for the regional ones.
    certificate_names: tuple[str, ...]
    # The variables that point its SDKs at another base URL (an emulator's).
    base_url_variables: tuple[str, ...]

    @property
    def endpoint(self) -> str:
        """The host name of its default endpoint."""
        return self.hosts[0]


GEMINI = Service(
    name="gemini",
    hosts=("generativelanguage.googleapis.com", "aiplatform.googleapis.com",
           "us-central1-aiplatform.googleapis.com", "europe-west4-aiplatform.googleapis.com"),
    certificate_names=("generativelanguage.googleapis.com", "aiplatform.googleapis.com",
                       "*.aiplatform.googleapis.com"),
    base_url_variables=("GOOGLE_GEMINI_BASE_URL", "GOOGLE_VERTEX_BASE_URL"),
)

SERVICES: dict[str, Service] = {GEMINI.name: GEMINI}
