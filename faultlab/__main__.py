"""`python -m faultlab`: SIGINT and SIGTERM are taken over before the command's imports."""

from faultlab import interrupt

interrupt.catch()

from faultlab.cli import main  # noqa: E402

main()
