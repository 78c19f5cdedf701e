"""faultlab's error tree; every expected failure is one of these.

    FaultlabError                 any failure faultlab expects and explains in one line
    ├── ProfileError              a profile is malformed (carries file:line: field: message lines)
    ├── PrivilegeError            neither root nor an unprivileged user namespace is available
    ├── LabError                  the lab (namespaces, links, processes) could not be built or run
    │   └── MechanismError        a fault or capture mechanism (iptables, tcpdump) failed
    └── EmulatorError             the Live API emulator failed

The CLI maps them to exit codes: ProfileError 2, the others 3.
"""

from __future__ import annotations


class FaultlabError(Exception):
    """Any failure faultlab expects and explains in one line."""


class ProfileError(FaultlabError):
    """A profile is malformed; `problems` holds one `file:line: field: message` line each."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


class PrivilegeError(FaultlabError):
    """Neither root nor an unprivileged user namespace is available."""


class LabError(FaultlabError):
    """The lab (namespaces, links, processes) could not be built or run."""


class MechanismError(LabError):
    """A fault or capture mechanism (iptables, tcpdump, a link change) failed."""


class EmulatorError(FaultlabError):
    """The Live API emulator failed."""
