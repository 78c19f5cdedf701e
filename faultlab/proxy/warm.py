"""The proxy's modules, imported as its process imports them: preloaded by a suite's warm server
(`faultlab.warm`), whose jobs fork their proxy (`faultlab.lab.zygote`)."""

from faultlab.proxy.__main__ import bare_addons_package

bare_addons_package()

from faultlab.proxy.process import cli  # noqa: E402  after: it imports the addons

__all__ = ["cli"]
