"""`faultlab cassette`: show a cassette, make one of a tape or of a capture (docs/cassettes.md)."""

from __future__ import annotations

from pathlib import Path

import click

from faultlab.commands.exits import fail, fail_with_problems
from faultlab.errors import FaultlabError, ProfileError


@click.group()
def cassette() -> None:
    """Recorded sessions: show one, make one of a tape or a capture (a profile replays one with
    `target: {cassette: FILE}`)."""


def _out_path(out: Path | None, default: Path) -> Path:
    from faultlab.cassette.format import SUFFIX

    path = out or default
    if not path.name.endswith(SUFFIX):
        fail(f"--out {path}: a cassette's name ends with {SUFFIX} (its audio goes beside it)", 2)
    return path


@cassette.command()
@click.argument("path", type=click.Path(dir_okay=True, path_type=Path), metavar="FILE|RUN_DIR")
def show(path: Path) -> None:
    """Print a cassette as a conversation: each message's time, side, kind and size; runs of
    audio chunks as one line; each connection's opening and end.

    FILE|RUN_DIR is a cassette (NAME.cassette.jsonl) or a run folder that recorded one.

    Exit codes: 0; 2 a bad file."""
    from faultlab.cassette.format import RUN_CASSETTE, read_cassette
    from faultlab.cassette.show import render

    if path.is_dir():
        path = path / RUN_CASSETTE
    try:
        recorded = read_cassette(path)
    except ProfileError as exc:
        fail_with_problems(exc)
    click.echo(render(recorded, str(path)))


@cassette.command("from-pcap")
@click.argument("capture", type=click.Path(path_type=Path), metavar="PCAP|RUN_DIR")
@click.option("--keylog", "keylogs", multiple=True, type=click.Path(path_type=Path),
              metavar="FILE", help="TLS key log (NSS format, as SSLKEYLOGFILE writes) to read "
                                   "wss:// with; repeatable. A run's key logs are found by "
                                   "themselves.")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              metavar="FILE", help="The cassette to write (default: the capture's name with "
                                   ".cassette.jsonl, in the current folder).")
def from_pcap(capture: Path, keylogs: tuple[Path, ...], out: Path | None) -> None:
    """Make a cassette of the WebSocket sessions in a capture (a pcap and its TLS key log, as
    tcpdump or Wireshark with SSLKEYLOGFILE make them, or a run folder's).

    Exit codes: 0; 2 no WebSocket in it, TLS it cannot read, or a bad file; 3 tshark failed."""
    from faultlab.capture.pcap import PcapFormatError
    from faultlab.capture.source import CaptureInputError
    from faultlab.cassette.build import build, protocol_of
    from faultlab.cassette.format import SUFFIX, write_cassette
    from faultlab.cassette.pcap import tape_from_pcap

    stem = capture.name if capture.is_dir() else capture.name.split(".", 1)[0]
    path = _out_path(out, Path(stem + SUFFIX))
    try:
        records = tape_from_pcap(capture, list(keylogs))
    except (CaptureInputError, PcapFormatError, ValueError) as exc:
        said = str(exc)
        fail(said if said.startswith(str(capture)) else f"{capture}: {said}", 2)
    except OSError as exc:
        fail(f"{exc.filename or capture}: {exc.strerror}", 2)
    except FaultlabError as exc:
        fail(str(exc), 3)
    recorded = build(records, protocol_of(records), "capture")
    write_cassette(path, recorded)
    messages = sum(len(rec.said) for rec in recorded.connections)
    click.echo(f"cassette {path}: {len(recorded.connections)} connection(s), {messages} "
               f"messages ({recorded.protocol})")


@cassette.command("build")
@click.argument("tape", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--protocol", type=click.Choice(["gemini", "openai"]), default=None,
              help="The API the tape speaks (default: the shape of its first message).")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              metavar="FILE", help="The cassette to write (default: TAPE's name with "
                                   ".cassette.jsonl, beside it).")
def build_command(tape: Path, protocol: str | None, out: Path | None) -> None:
    """Make a cassette of a tape (`faultlab emulator serve --record FILE` writes one).

    Exit codes: 0; 2 a bad tape."""
    from faultlab.cassette.build import build, protocol_of
    from faultlab.cassette.format import SUFFIX, write_cassette
    from faultlab.cassette.tape import read_tape

    path = _out_path(out, tape.with_name(tape.name.split(".", 1)[0] + SUFFIX))
    try:
        records = list(read_tape(tape))
    except (OSError, ValueError) as exc:
        fail(str(exc), 2)
    recorded = build(records, protocol or protocol_of(records), "tape")
    write_cassette(path, recorded)
    click.echo(f"cassette {path}: {len(recorded.connections)} connection(s)")
