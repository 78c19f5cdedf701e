"""`faultlab emulator serve` (the Live API emulator as a service) and `faultlab calibrate` (an
endpoint measured beside a personality's ranges)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import click

from faultlab import interrupt
from faultlab.commands.exits import EXIT_INTERRUPTED, fail, fail_with_problems
from faultlab.errors import FaultlabError, ProfileError


@click.group()
def emulator() -> None:
    """The Live API emulator."""


@emulator.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=0, show_default=True, type=click.IntRange(0, 65535),
              help="Port to listen on (0 picks a free one).")
@click.option("--personality", default=None, metavar="NAME|FILE",
              help="Which measured service behaviour to reproduce: a name (gemini-dev-2026-10, "
                   "the default; vertex-2026, openai-realtime...) or a personality file (YAML: "
                   "`base: NAME` and the fields it changes, as `faultlab calibrate --out` "
                   "writes). With --cassette, the cassette's by default.")
@click.option("--time-scale", default=1.0, show_default=True, type=float,
              help="Factor on every server timer (0.1 replays ten times faster).")
@click.option("--ca-dir", type=click.Path(path_type=Path), default=None,
              help="Folder of the lab CA (default: ~/.local/share/faultlab/ca).")
@click.option("--utterances", type=click.Path(path_type=Path), multiple=True,
              help="Folder of NAME.wav + NAME.txt: speech the emulator recognises (repeatable).")
@click.option("--events", "events_path", type=click.Path(path_type=Path), default=None,
              help="JSONL file for the emulator's events (default: $FAULTLAB_EVENTS).")
@click.option("--seed", type=int, default=None, help="Seed for the drawn delays.")
@click.option("--set", "settings", multiple=True, metavar="FIELD=YAML",
              help="Change one personality field, e.g. --set connection_lifetime_s=600.")
@click.option("--cassette", type=click.Path(dir_okay=False, path_type=Path), default=None,
              metavar="FILE", help="Serve this cassette's recorded server side instead "
                                   "(NAME.cassette.jsonl; its personality unless --personality "
                                   "names one).")
@click.option("--divergence", type=click.Choice(["strict", "fallback"]), default="strict",
              show_default=True, help="What a replay does when the client sends what the "
                                      "recording's did not: close the connection, or let the "
                                      "personality take over.")
@click.option("--record", "tape", type=click.Path(dir_okay=False, path_type=Path), default=None,
              metavar="FILE", help="Write every connection's frames to this tape (JSON lines; "
                                   "`faultlab cassette build` makes a cassette of it).")
def serve(host: str, port: int, personality: str | None, time_scale: float, ca_dir: Path | None,
          utterances: tuple[Path, ...], events_path: Path | None, seed: int | None,
          settings: tuple[str, ...], cassette: Path | None, divergence: str,
          tape: Path | None) -> None:
    """Serve the Live API on TLS (or replay a cassette); prints the environment an SDK client
    needs.

    Exit codes: 0 stopped; 2 a bad personality file, cassette or --set; 3 it could not serve."""
    import asyncio

    from faultlab.cassette.format import read_cassette
    from faultlab.emulator.personality import DEFAULT_PERSONALITY, PROTOCOL_DEFAULTS
    from faultlab.emulator.run import serve_until_stopped
    from faultlab.plainyaml import load_plain

    recorded = None
    if cassette is not None:
        try:
            recorded = read_cassette(cassette)
        except ProfileError as exc:
            fail_with_problems(exc)
        if personality is None:
            personality = recorded.personality or PROTOCOL_DEFAULTS.get(recorded.protocol)
        if personality is None:
            fail(f"the {recorded.protocol} API brings no personality to replay {cassette} "
                 "with: name one (--personality)", 2)
    personality = personality or DEFAULT_PERSONALITY

    overrides: dict[str, object] = {}
    for item in settings:
        key, sep, value = item.partition("=")
        if not sep or not key:
            fail(f"--set {item!r}: write FIELD=VALUE", 2)
        try:
            overrides[key.strip()] = load_plain(value, "--set")[1]
        except ProfileError:
            fail(f"--set {item!r}: the value is not YAML", 2)

    def announce(env: dict[str, str], bound: int) -> None:
        for key, value in env.items():
            click.echo(f"export {key}={value}")
        click.echo(f"# faultlab emulator ({personality}, time scale {time_scale:g}) "
                   f"listening on port {bound}; Ctrl-C stops it", err=True)
        sys.stdout.flush()

    try:
        asyncio.run(serve_until_stopped(host, port, personality, time_scale, ca_dir, utterances,
                                        events_path, seed, announce, overrides, tape, recorded,
                                        "fallback" if divergence == "fallback" else "strict"))
    except ProfileError as exc:  # the personality file's problems, each file:line: field
        fail_with_problems(exc)
    except FaultlabError as exc:
        fail(str(exc), 3)


@click.command()
@click.option("--base-url", metavar="URL", default=None,
              help="An emulator's base URL, as `emulator serve` prints it (default: the "
                   "personality's base URL variable, GOOGLE_GEMINI_BASE_URL or OPENAI_BASE_URL, "
                   "else the real service, with its key from the environment).")
@click.option("--ca", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              metavar="FILE", help="The CA certificate (PEM) the endpoint's TLS is checked "
                                   "against: the emulator's SSL_CERT_FILE (which the SDK also "
                                   "reads by itself).")
@click.option("--model", default=None,
              help="The model to open sessions with (default: gemini-3.8-live, the field "
                   "measurements' model; gpt-realtime for an OpenAI Realtime personality).")
@click.option("--personality", default="gemini-dev-2026-10", show_default=True,
              metavar="NAME|FILE", help="The ranges to compare with: a built-in personality or "
                                        "a personality file.")
@click.option("--samples", type=click.IntRange(1, 20), default=3, show_default=True,
              help="Runs of each probe (the lockout probe runs once, for about 12 s); against "
                   "an emulator at time scale 1, 1 takes about 20 s and 3 about 36 s.")
@click.option("--tolerance", "tolerance_s", type=click.FloatRange(0, 10), default=0.15,
              show_default=True, metavar="SECONDS",
              help="How far a timing may stray outside its range before it is flagged: network "
                   "round trips (a connect takes about four) and a loaded machine.")
@click.option("--timeout", "timeout_s", type=click.FloatRange(0.5, 120), default=10.0,
              show_default=True, metavar="SECONDS", help="The longest wait for any one answer.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              metavar="FILE", help="Write the measured values as a personality file, for "
                                   "`emulator serve --personality FILE`.")
def calibrate(base_url: str | None, ca: Path | None, model: str | None, personality: str,
              samples: int, tolerance_s: float, timeout_s: float, as_json: bool,
              out: Path | None) -> None:
    """Measure a realtime endpoint with the official SDK, beside a personality's ranges.

    Gemini Live: fresh and resumed set-up (S1, S2, U1), the refused resume after an idle drop
    and the one after the release window (R1, R2), the lockout while the old connection is open
    and the unlock once it is closed (L1-L3), a pending tool call answered after a resume (R4,
    T2), a text turn's reply (T7), the end of a spoken turn (T1) and the reply's audio rate (T3).
    OpenAI Realtime (an openai-realtime personality): session.created (O2), a response and a
    function output's answer (O11, O10), an in-band error (O6), no resumption (O3), the end of a
    spoken turn (O13), an unknown model (O4).

    Exit codes: 0 every measure within its range; 1 one or more flagged; 2 a usage error;
    3 the endpoint gave no session."""
    import asyncio

    from faultlab.calibrate import Endpoint, EndpointError, probes_for
    from faultlab.calibrate import calibrate as measure
    from faultlab.emulator.personality import personality_source, personality_with
    from faultlab.private import redact_text
    from faultlab.protocols import PROTOCOLS

    try:
        base, changes = personality_source(personality)
        compared = personality_with(base, changes)
    except ProfileError as exc:
        fail_with_problems(exc)
    except ValueError as exc:
        fail(str(exc), 2)
    if out is not None and not os.access(out.absolute().parent, os.W_OK | os.X_OK):
        fail(f"--out {out}: cannot write in {out.absolute().parent}", 2)
    try:
        probes = probes_for(compared.protocol)
    except ValueError as exc:
        fail(str(exc), 2)
    service = PROTOCOLS[compared.protocol].service
    base_url = base_url or next((os.environ[v] for v in service.base_url_variables
                                 if os.environ.get(v)), None)
    try:
        endpoint = Endpoint.from_options(base_url, ca, model or probes.default_model, timeout_s)
    except ValueError as exc:
        fail(str(exc), 2)
    click.echo(f"faultlab calibrate: {endpoint.describe()}, {samples} sample(s) a probe, about "
               f"{probes.run_time_s(samples):.0f} s against an emulator at time scale 1",
               err=True)
    try:
        result = asyncio.run(interrupt.cancel_on_signal(measure(
            endpoint, compared, samples, tolerance_s,
            lambda line: click.echo(f"  {line}", err=True))))
    except asyncio.CancelledError:  # only a signal cancels it; main() exits with its code
        interrupt.announce()
        sys.exit(EXIT_INTERRUPTED)
    except EndpointError as exc:
        fail(str(exc), 3)
    unwritten = False
    if out is not None:
        try:
            out.write_text(result.personality_file(base, changes))
            click.echo(f"personality file: {out}", err=True)
        except OSError as exc:  # the measures are still printed below
            click.echo(f"faultlab: cannot write {out}: {exc.strerror or exc}", err=True)
            unwritten = True
    click.echo(json.dumps(result.to_json(), indent=2) if as_json else redact_text(result.text()))
    sys.exit(2 if unwritten else 1 if result.flagged else 0)
