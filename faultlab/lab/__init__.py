"""Network labs: where the client, the router and the target live (see `faultlab.lab.base`).

A backend is a `Lab` class registered here by the name a profile's `network.backend` gives.
"""

from __future__ import annotations

from faultlab.lab.base import Lab, LabSpec
from faultlab.lab.docker import DockerLab
from faultlab.lab.netns import Addressing, NetnsLab

LABS: dict[str, type[Lab]] = {NetnsLab.backend: NetnsLab, DockerLab.backend: DockerLab}

__all__ = ["LABS", "Addressing", "DockerLab", "Lab", "LabSpec", "NetnsLab"]
