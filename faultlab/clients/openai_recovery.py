"""openai-recovery: faultlab/clients/realtime.py's client, replaying its conversation into a new session."""

from faultlab.clients.realtime import recovery_cli

if __name__ == "__main__":
    recovery_cli()
