"""openai-webrtc: faultlab/clients/webrtc.py's client, giving up on a lost call."""

from faultlab.clients.webrtc import naive_cli

if __name__ == "__main__":
    naive_cli()
