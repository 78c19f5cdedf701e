"""mitmproxy embedded in the router namespace: the frame log (and, later, app-level faults)."""
