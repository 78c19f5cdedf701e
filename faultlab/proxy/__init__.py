"""mitmproxy embedded in the router namespace: the frame log and the app-level faults."""
