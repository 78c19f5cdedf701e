"""openai-naive: faultlab/clients/realtime.py's client, giving up on a lost session."""

from faultlab.clients.realtime import naive_cli

if __name__ == "__main__":
    naive_cli()
