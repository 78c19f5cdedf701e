"""Profiles: the YAML that declares a run, validated into models with errors at file:line: field.

A profile names the target (`faultlab.targets`) and the client, the network, a timeline of faults
(`.steps`) and the expectations; its other sections are in `.sections`, its loading and the
checks that span sections in `.load`. Faults (`do: {fault: drop, ...}`), expectations and target
kinds are validated by the models their own modules register, so adding one never touches this
package.
"""

from __future__ import annotations

from faultlab.profile.load import (
    Profile,
    RawProfile,
    load_profile,
    parse_profile,
    recording,
    unset_pass_env,
    with_client_image,
)
from faultlab.profile.sections import Capture, Client, FieldRanges, Mic, Network, Subnets, Turn
from faultlab.profile.steps import RawStep, Step, Trigger
from faultlab.targets import EmulatorTarget, Program, RemoteTarget, Target

__all__ = ["Capture", "Client", "EmulatorTarget", "FieldRanges", "Mic", "Network", "Profile",
           "Program", "RawProfile", "RawStep", "RemoteTarget", "Step", "Subnets", "Target",
           "Trigger", "Turn", "load_profile", "parse_profile", "recording", "unset_pass_env",
           "with_client_image"]
