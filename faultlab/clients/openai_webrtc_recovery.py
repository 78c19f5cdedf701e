"""openai-webrtc-recovery: faultlab/clients/webrtc.py's client, calling again after a loss."""

from faultlab.clients.webrtc import recovery_cli

if __name__ == "__main__":
    recovery_cli()
