"""The `faultlab` command's entry, for the console script and `python -m faultlab` alike: SIGINT
and SIGTERM are taken over before anything heavy is imported (click and the CLI take ~0.1 s, when
a signal would get Python's default action), so that a signal at any moment exits 130 or 143."""

from faultlab import interrupt


def main() -> None:
    """`faultlab`: the signals caught, then the CLI imported and run (faultlab.cli.main)."""
    interrupt.catch()
    from faultlab.cli import main as command

    command()


if __name__ == "__main__":
    main()
