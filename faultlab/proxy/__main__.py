"""The proxy process: mitmproxy in transparent mode in the router namespace.

    python -m faultlab.proxy --port 8080 --confdir DIR --control SOCKET [--upstream-ca PEM]
        [--tape FILE]

The runner starts it through the lab's enter helper; `MITMPROXY_SSLKEYLOGFILE` in its
environment makes it log both legs' TLS keys.
"""

from __future__ import annotations

import importlib.util
import sys


def bare_addons_package() -> None:
    """Make `mitmproxy.addons` a package that imports nothing of itself: its __init__ imports
    every default addon (flask, ldap3, werkzeug, ...) to list them, 0.19 s of CPU a run
    (measured: the four addons the proxy uses, 0.51 s with it, 0.33 s without)."""
    spec = importlib.util.find_spec("mitmproxy.addons")
    assert spec is not None
    sys.modules["mitmproxy.addons"] = importlib.util.module_from_spec(spec)


def main() -> None:
    bare_addons_package()
    from faultlab.proxy.process import cli  # after: it imports the addons

    cli()


if __name__ == "__main__":
    main()
