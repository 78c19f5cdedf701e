"""Network labs: where the client, the router and the target live (see `faultlab.lab.base`).

A backend is a `Lab` class registered here by the name a profile's `network.backend` gives; it
says what it is needed for (`Lab.runs_images`) and what `lab gc` removes of it (`Lab.leftovers`).
"""

from __future__ import annotations

from faultlab.lab.base import Lab, LabSpec
from faultlab.lab.docker import DockerLab
from faultlab.lab.netns import Addressing, NetnsLab

# A backend built on another comes after it (its garbage goes first: `faultlab.lab.gc`).
LABS: dict[str, type[Lab]] = {NetnsLab.backend: NetnsLab, DockerLab.backend: DockerLab}


def backend_for(images: bool) -> str:
    """The backend a lab gets when the profile names none: the one that runs containers when a
    member names an image, else the one that runs none."""
    return next(name for name, lab in LABS.items() if lab.runs_images == images)


__all__ = ["LABS", "Addressing", "DockerLab", "Lab", "LabSpec", "NetnsLab", "backend_for"]
