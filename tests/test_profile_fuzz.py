"""Hostile profiles (issue 17): whatever the bytes, loading ends in a profile or a ProfileError
of `file:line: field: message` lines, quickly, and the CLI exits 0 or 2 without a traceback.

The mutations are seeded (FAULTLAB_FUZZ_SEED picks another run); a failure names the case, which
`mutants(seed, count)` rebuilds.
"""

from __future__ import annotations

import os
import random
import re
import resource
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from faultlab.errors import ProfileError
from faultlab.plainyaml import MAX_BYTES, MAX_DEPTH, MAX_INT_DIGITS, MAX_VALUES
from faultlab.profile import load_profile, parse_profile

from .conftest import PROFILES, REPO, faultlab, patience

SEED = int(os.environ.get("FAULTLAB_FUZZ_SEED", "17"))
CASES = 5000
# CPU seconds (not wall-clock: a busy machine does not stretch them) that no single profile may
# cost to load or refuse; the slowest shipped one takes milliseconds.
CPU_S = 1.0
LAUGHS_CPU_S = 5
SOURCE = "fuzz.yaml"
PROBLEM = re.compile(rf"{re.escape(SOURCE)}:[1-9][0-9]*: [^\n]+?: [^\n]+")
SHIPPED = {path.name: path.read_bytes() for path in sorted(PROFILES.rglob("*.yaml"))}

Mutator = Callable[[random.Random, bytes], bytes]
VALUE = re.compile(rb"(?<=: )[^,\[\]{}\n]+")
TAGS = [b"!!str", b"!!int", b"!!float", b"!!bool", b"!!null", b"!!seq", b"!!map", b"!", b"!!set",
        b"!!omap", b"!!pairs", b"!!timestamp", b"!!binary", b"!!merge", b"!!value", b"!custom",
        b"!!python/object/apply:os.system", b"!!python/name:os.system", b"tag:x.org,2000:y",
        b"!<tag:yaml.org,2002:float>", b"!<!>"]
SCALARS = [b"", b"~", b"null", b".nan", b"-.inf", b".inf", b"0x", b"0x" + b"f" * 120, b"0o17",
           b"0b102", b"1_000", b"+.5", b"1:2:3", b"1" + b":59" * 60, b"190:20:30.15",
           b"2024-13-45", b"2001-12-14t21:59:43.10-05:00", b"=", b"<<", b"'", b'"', b"yes", b"NO",
           b"-1", b"0", b"1e400s", b"9" * 400 + b"s", b"1.5s", b"-2s", b"[]", b"{}", b"*nope",
           b"&a x", b'"\\ud800"', b'"\\x00"', b'"\\U0010ffff"', b"|\n  block\n", b"x" * 10_000,
           b"9" * MAX_INT_DIGITS, b"9" * (MAX_INT_DIGITS + 1), b"9" * 4301, b"1e308", b"-0.0"]
KEYS = [b"nth", b"regex", b"equals", b"time_scale", b"overrides", b"snaplen_bytes", b"port",
        b"seed", b"personality", b"connection", b"fault", b"id", b"at", b"step", b"frame", b"where",
        b"sysctl", b"subnets", b"hosts", b"mic", b"utterances", b"forward", b"from", b"<<"]
PATTERNS = [b"(", b"x{4294967296}", b"x{4294967295}", b"(?P<", b"[", b"(" * 499 + b")" * 499,
            b"a" * 1001, b"(?i)x", b"\\N{NOPE}", b"(a*)*b", b".*"]
RAW = [b"\xff", b"\xfe\xff", b"\xc3", b"\xed\xa0\x80", b"\xc0\xaf", b"\x80", b"\x00", b"\x01",
       b"\x1b", b"\x7f", b"\xc2\x85", b"\xef\xbb\xbf", b"\t", b"\r", b"\r\n", b"{", b"}", b"[", b"]",
       b": ", b"- ", b"? ", b"&x ", b"*x", b"|", b">", b"%YAML 1.1\n", b"\n---\n", b"\n...\n", b"'",
       b'"', b"#", b"!", b"<<: *x", b"\\", b",", b"@", b"`"]


def _at_value(rng: random.Random, data: bytes, change: Callable[[bytes], bytes]) -> bytes:
    spots = list(VALUE.finditer(data))
    if not spots:
        return data + change(b"x")
    spot = rng.choice(spots)
    return data[:spot.start()] + change(spot.group()) + data[spot.end():]


def _lines(data: bytes) -> list[bytes]:
    return data.splitlines(keepends=True) or [b""]


def flip_byte(rng: random.Random, data: bytes) -> bytes:
    i = rng.randrange(len(data) or 1)
    return data[:i] + bytes([rng.randrange(256)]) + data[i + 1:]


def truncate(rng: random.Random, data: bytes) -> bytes:
    return data[:rng.randrange(len(data) + 1)]


def duplicate_line(rng: random.Random, data: bytes) -> bytes:
    lines = _lines(data)
    i = rng.randrange(len(lines))
    lines[i:i] = [lines[i]] * rng.choice([1, 1, 2, 50])
    return b"".join(lines)


def drop_line(rng: random.Random, data: bytes) -> bytes:
    lines = _lines(data)
    del lines[rng.randrange(len(lines))]
    return b"".join(lines)


def swap_lines(rng: random.Random, data: bytes) -> bytes:
    lines = _lines(data)
    i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
    lines[i], lines[j] = lines[j], lines[i]
    return b"".join(lines)


def reindent(rng: random.Random, data: bytes) -> bytes:
    lines = _lines(data)
    i = rng.randrange(len(lines))
    lines[i] = rng.choice([b" ", b"  ", b"\t", b""]) + lines[i].lstrip(b" " * rng.randrange(2))
    return b"".join(lines)


def nest(rng: random.Random, data: bytes) -> bytes:
    n = rng.choice([2, MAX_DEPTH - 2, MAX_DEPTH, MAX_DEPTH + 1, 500, 999, 1001, 5000])
    shapes = [b"[" * n + b"]" * n, b"{a: " * n + b"1" + b"}" * n,
              b"\n" + b"".join(b"  " * (k + 1) + b"- \n" for k in range(min(n, 300)))]
    return _at_value(rng, data, lambda _: rng.choice(shapes))


def tag(rng: random.Random, data: bytes) -> bytes:
    return _at_value(rng, data, lambda old: rng.choice(TAGS) + b" " + old)


def huge_int(rng: random.Random, data: bytes) -> bytes:
    digits = rng.choice([MAX_INT_DIGITS, MAX_INT_DIGITS + 1, 4299, 4301, 100_000])
    return _at_value(rng, data, lambda _: rng.choice([b"9", b"1_"]) * digits)


def alias_bomb(rng: random.Random, data: bytes) -> bytes:
    levels, fan = rng.choice([(3, 10), (5, 10), (9, 10), (30, 2), (4, 30)])
    bomb = [b"x-l0: &l0 [lol]"] + [
        b"x-l%d: &l%d [%s]" % (i, i, b", ".join([b"*l%d" % (i - 1)] * fan))
        for i in range(1, levels + 1)]
    shapes = [b"\n".join(bomb) + b"\n" + data, data + b"\nx-self: &s [*s]\n",
              data + b"\nx-merge: &m {a: 1}\nx-m2: {<<: [*m, *m]}\n",
              _at_value(rng, data, lambda old: b"&z " + old) + b"\nx-again: *z\n"]
    return rng.choice(shapes)


def bad_regex(rng: random.Random, data: bytes) -> bytes:
    pattern = rng.choice(PATTERNS).replace(b"'", b"''")
    trigger = b"{frame: {regex: {tool_call.id: '%s'}}}" % pattern
    if b"when: {" not in data:
        return data + b"\ntimeline:\n  - when: " + trigger + b"\n    do: {fault: freeze}\n"
    head, _, tail = data.partition(b"when: {")
    return head + b"when: " + trigger + tail[tail.find(b"}\n") + 1:]


def raw_bytes(rng: random.Random, data: bytes) -> bytes:
    i = rng.randrange(len(data) + 1)
    return data[:i] + rng.choice(RAW) + data[i:]


def weird_value(rng: random.Random, data: bytes) -> bytes:
    return _at_value(rng, data, lambda _: rng.choice(SCALARS))


def weird_key(rng: random.Random, data: bytes) -> bytes:
    i = data.find(b"{", rng.randrange(len(data) or 1))
    if i < 0:
        return data + b"\n" + rng.choice(KEYS) + b": " + rng.choice(SCALARS) + b"\n"
    return data[:i + 1] + rng.choice(KEYS) + b": " + rng.choice(SCALARS) + b", " + data[i + 1:]


def splice(rng: random.Random, data: bytes) -> bytes:
    other = SHIPPED[rng.choice(sorted(SHIPPED))]
    start = rng.randrange(len(other))
    i = rng.randrange(len(data) + 1)
    return data[:i] + other[start:start + rng.randrange(1, 400)] + data[i:]


MUTATORS: list[Mutator] = [flip_byte, truncate, duplicate_line, drop_line, swap_lines, reindent,
                           nest, tag, huge_int, alias_bomb, bad_regex, raw_bytes, weird_value,
                           weird_key, splice]


def mutants(seed: int, count: int) -> Iterator[tuple[str, bytes]]:
    """`count` mutations of the shipped profiles, one to three mutators each, named for a report."""
    rng = random.Random(seed)
    for i in range(count):
        name = rng.choice(sorted(SHIPPED))
        data = SHIPPED[name]
        applied = [rng.choice(MUTATORS) for _ in range(rng.choice([1, 1, 2, 3]))]
        for mutate in applied:
            data = mutate(rng, data)
        yield f"seed {seed} case {i}: {name} + {', '.join(m.__name__ for m in applied)}", data


def billion_laughs(levels: int = 9, fan: int = 10) -> bytes:
    """About 1 KB of YAML that a loader expanding aliases builds as fan**levels strings."""
    lines = [b"lol0: &lol0 [lol]"] + [
        b"lol%d: &lol%d [%s]" % (i, i, b", ".join([b"*lol%d" % (i - 1)] * fan))
        for i in range(1, levels + 1)]
    return b"\n".join(lines) + b"\nname: laughs\nclient: {command: [sh]}\n"


BASE = b"name: hostile\nclient: {command: [sh]}\n"
FRAMES = (b"name: frames\nclient: {command: [sh]}\ntarget: {emulator: {}}\ntimeline:\n"
          b"  - when: {frame: {regex: {tool_call.id: 'PATTERN'}}}\n    do: {fault: freeze}\n")


def _alias_chain(anchors: int, depth: int) -> bytes:
    """Anchors each nesting the previous alias `depth` lists deep: deep only once expanded."""
    out, previous = [], b"x"
    for i in range(anchors):
        out.append(b"c%d: &c%d %s%s%s" % (i, i, b"[" * depth, previous, b"]" * depth))
        previous = b"*c%d" % i
    return b"\n".join(out) + b"\n" + BASE


# The hostile-input study's findings, and their neighbours: the bytes, and the problem expected.
HOSTILE: dict[str, tuple[bytes, str]] = {
    "non-UTF-8 byte": (BASE + b"description: caf\xe9\n",
                       "fuzz.yaml:3: (profile): not UTF-8 (byte 0xe9 at line 3)"),
    "UTF-16": ("name: x\n".encode("utf-16"), "fuzz.yaml:1: (profile): not UTF-8 (byte 0xff"),
    "NUL byte": (BASE + b"description: a\x00b\n", "fuzz.yaml:3: (profile): YAML: unprintable"),
    "600 nested lists": (BASE + b"description: " + b"[" * 600 + b"]" * 600 + b"\n",
                         f"fuzz.yaml:3: description: nested deeper than {MAX_DEPTH}"),
    f"{MAX_DEPTH + 1} nested lists and mappings": (
        BASE + b"timeline:\n  - when: {event: e, where: {a: " + b"[" * (MAX_DEPTH - 4)
        + b"]" * (MAX_DEPTH - 4) + b"}}\n    do: {fault: drop}\n",
        f"fuzz.yaml:4: timeline: nested deeper than {MAX_DEPTH} lists and mappings"),
    "100 nested block lists": (BASE + b"description:\n" + b"".join(
        b"  " * k + b"- \n" for k in range(100)), "description: nested deeper than"),
    "nesting by aliases": (_alias_chain(10, 40), "c1: the alias *c0 nests deeper than"),
    "self-referencing alias": (b"name: &a [*a]\nclient: {command: [sh]}\n",
                               "fuzz.yaml:1: name[0]: the alias *a is inside the value it names"),
    "billion laughs": (billion_laughs(), f"the alias *lol3 expands past {MAX_VALUES} values"),
    "merge bomb": (b"m0: &m0 {a: 1, b: 2, c: 3, d: 4, e: 5, f: 6, g: 7, h: 8, i: 9, j: 10}\n" + b"".join(
        b"m%d: &m%d {<<: [%s]}\n" % (i, i, b", ".join([b"*m%d" % (i - 1)] * 10)) for i in range(1, 6)
    ) + BASE, "expands past"),
    f"{MAX_VALUES + 1} values": (BASE + b"hosts: [" + b"a, " * MAX_VALUES + b"a]\n",
                                 f"more than {MAX_VALUES} values"),
    "4,301-digit integer": (BASE + b"timeout: " + b"9" * 4301 + b"\n",
                            f"fuzz.yaml:3: timeout: an integer of 4301 digits; at most "
                            f"{MAX_INT_DIGITS}"),
    "sexagesimal integer": (BASE + b"timeout: 1" + b":59" * 60 + b"\n", "timeout: an integer of"),
    "!!float true": (BASE + b"timeout: !!float true\n", "timeout: 'true' is not a !!float value"),
    "!!int abc": (BASE + b"seed: !!int abc\n", "seed: 'abc' is not a !!int value"),
    "!!timestamp abc": (BASE + b"timeout: !!timestamp abc\n",
                        "fuzz.yaml:3: timeout: the tag !!timestamp is not plain data"),
    "!!binary": (BASE + b"description: !!binary aGVsbG8=\n", "the tag !!binary is not plain"),
    "!!python/object/apply": (b"name: !!python/object/apply:os.system [echo hi]\n"
                              b"client: {command: [sh]}\n",
                              "fuzz.yaml:1: name: the tag !!python/object/apply:os.system"),
    "custom tag": (BASE + b"description: !secret x\n", "description: the tag !secret is not"),
    "!!set": (BASE + b"hosts: !!set {a, b}\n", "hosts: the tag !!set is not plain data"),
    "!!map on a list": (BASE + b"hosts: !!map [a]\n", "hosts: the tag !!map is not plain data"),
    "undefined alias": (BASE + b"description: *nope\n", "the alias *nope names no anchor"),
    "anchor defined twice": (BASE + b"a: &x 1\nb: &x 2\n", "fuzz.yaml:4: b: the anchor &x is"),
    "list as a key": (BASE + b"? [a, b]\n: 1\n", "fuzz.yaml:3: (profile): a key is one value"),
    "two documents": (BASE + b"---\n" + BASE, "expected a single document"),
    "regex {4294967296}": (FRAMES.replace(b"PATTERN", b"x{4294967296}"),
                           "fuzz.yaml:5: timeline[0].when.frame.regex: tool_call.id: bad regular "
                           "expression: the repetition number is too large"),
    "regex nested 499 deep": (FRAMES.replace(b"PATTERN", b"(" * 499 + b")" * 499),
                              "bad regular expression: groups nested too deeply"),
    "regex of 1,001 characters": (FRAMES.replace(b"PATTERN", b"a" * 1001),
                                  "a regular expression of 1001 characters; at most 1000"),
    "file over 5 MB": (BASE + b"description: " + b"x" * MAX_BYTES + b"\n",
                       "fuzz.yaml:1: (profile): larger than 5 MB"),
}

# Hostile-looking but plain: these load.
PLAIN: dict[str, bytes] = {
    "a date is a string": BASE + b"description: 2024-13-45\n",
    "'=' is a string": BASE + b"description: =\n",
    "an alias within the limits": b"name: &n x\nclient: {command: [sh], args: [*n, *n]}\n",
    f"{MAX_DEPTH} nested lists and mappings": BASE + b"timeline:\n  - when: {event: e, where: {a: "
    + b"[" * (MAX_DEPTH - 5) + b"]" * (MAX_DEPTH - 5) + b"}}\n    do: {fault: drop}\n",
    "!!float on an integer": BASE + b"target: {emulator: {time_scale: !!float 2}}\n",
    "a byte-order mark": b"\xef\xbb\xbf" + BASE,
    "a 4 MB description": BASE + b"description: " + b"x" * (4 * 2**20) + b"\n",
}


def _outcome(data: bytes) -> str:
    """'loaded' or 'refused'; anything but a ProfileError of well-formed lines fails the test."""
    try:
        parse_profile(data, SOURCE)
    except ProfileError as exc:
        bad = [p for p in exc.problems if not PROBLEM.fullmatch(p)]
        assert exc.problems and not bad, f"malformed problem lines: {bad!r}"[:2000]
        return "refused"
    return "loaded"


def test_mutated_profiles_load_or_are_refused_quickly() -> None:
    """Thousands of mutations of the shipped profiles (flipped bytes, truncation, repeated lines,
    nesting, tags, huge integers, alias bombs, bad regexes, non-UTF-8 bytes) each load or raise
    a ProfileError of `file:line: field: message` lines, none burning a second of CPU."""
    outcomes: Counter[str] = Counter()
    costliest = (0.0, "")
    for name, data in mutants(SEED, CASES):
        started = time.process_time()
        try:
            outcomes[_outcome(data)] += 1
        except Exception as exc:
            raise AssertionError(f"{name}: {type(exc).__name__}: {exc}"[:2000]) from exc
        costliest = max(costliest, (time.process_time() - started, name))
    assert costliest[0] < CPU_S, f"{costliest[1]} took {costliest[0]:.2f} s of CPU"
    # The mutations reach past the YAML into the models, and not only there.
    assert outcomes["loaded"] > CASES // 20 and outcomes["refused"] > CASES // 2, outcomes


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_profiles_are_refused_with_a_clear_problem(case: str) -> None:
    """Each hostile input the study found is refused, with its file:line: field, before it costs
    a second of CPU."""
    data, expected = HOSTILE[case]
    started = time.process_time()
    with pytest.raises(ProfileError) as info:
        parse_profile(data, SOURCE)
    assert time.process_time() - started < CPU_S
    assert any(expected in problem for problem in info.value.problems), info.value.problems
    assert all(PROBLEM.fullmatch(problem) for problem in info.value.problems), info.value.problems


@pytest.mark.parametrize("case", sorted(PLAIN))
def test_plain_data_that_looks_hostile_loads(case: str) -> None:
    """Dates, '=', aliases within the limits and a byte-order mark are plain data."""
    assert parse_profile(PLAIN[case], SOURCE).name


def test_text_with_a_lone_surrogate_is_not_utf8() -> None:
    """A str that no UTF-8 file could hold is refused as such, not crashed on by the parser."""
    with pytest.raises(ProfileError, match=r"fuzz.yaml:3: \(profile\): not UTF-8 \(byte 0xed"):
        parse_profile(BASE.decode() + "description: \ud800\n", SOURCE)


def read_so_far() -> int:
    """The bytes this process has read so far (/proc/self/io's rchar)."""
    io = dict(line.split(": ") for line in Path("/proc/self/io").read_text().splitlines())
    return int(io["rchar"])


def test_a_file_past_the_limit_is_read_no_further(tmp_path: Path) -> None:
    """A 50 MB profile is refused after reading 5 MB of it, not parsed for half a minute."""
    path = tmp_path / "huge.yaml"
    with path.open("wb") as file:
        file.write(BASE + b"description: ")
        file.truncate(50 * 2**20)
    before = read_so_far()
    with pytest.raises(ProfileError, match="larger than 5 MB"):
        load_profile(path)
    assert MAX_BYTES < read_so_far() - before < MAX_BYTES + 2**20


def _write(folder: Path, cases: dict[str, bytes]) -> list[Path]:
    paths = []
    for i, (name, data) in enumerate(sorted(cases.items())):
        path = folder / f"{i:02d}-{re.sub(r'[^A-Za-z0-9]+', '-', name)}.yaml"
        path.write_bytes(data)
        paths.append(path)
    return paths


CLI_CASES = ["non-UTF-8 byte", "600 nested lists", "self-referencing alias", "4,301-digit integer",
             "!!float true", "regex {4294967296}", "file over 5 MB"]


@pytest.mark.parametrize("case", CLI_CASES)
def test_validate_refuses_hostile_files_with_exit_2(tmp_path: Path, case: str) -> None:
    """`faultlab validate` prints the problem and exits 2, without a traceback."""
    (path,) = _write(tmp_path, {case: HOSTILE[case][0]})
    done = faultlab("validate", str(path))
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert HOSTILE[case][1].replace(SOURCE, str(path)) in done.stderr


def test_validate_answers_mutants_with_0_or_2(tmp_path: Path) -> None:
    """Mutated profiles through the real command: each line is a problem, exit 0 or 2."""
    paths = _write(tmp_path, dict(mutants(SEED + 1, 40)))
    done = faultlab("validate", *map(str, paths))
    assert done.returncode in (0, 2), done.stderr
    assert "Traceback" not in done.stderr
    assert all(re.match(rf"{re.escape(str(tmp_path))}/\S+\.yaml:\d+: ", line)
               for line in done.stderr.splitlines()), done.stderr[-3000:]


def test_validate_without_libyaml_refuses_the_hostile_files(tmp_path: Path) -> None:
    """The pure-Python parser (when libyaml is missing) is held to the same limits."""
    paths = _write(tmp_path, {name: data for name, (data, _) in HOSTILE.items()})
    code = ("import yaml; yaml.__with_libyaml__ = False\n"
            "from faultlab.plainyaml import PlainLoader\n"
            "assert PlainLoader.__mro__[1] is yaml.SafeLoader\n"
            "from faultlab.cli import main; main()")
    done = subprocess.run([sys.executable, "-c", code, "validate", *map(str, paths)], cwd=REPO,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-3000:]
    for path, (_, expected) in zip(paths, (HOSTILE[name] for name in sorted(HOSTILE)), strict=True):
        assert expected.replace(SOURCE, str(path)) in done.stderr, (path, done.stderr[-3000:])


def _limit_memory_and_cpu() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (2**30, 2**30))
    # Killed (SIGXCPU) past this much CPU: the start-up and the refusal take a fraction of it.
    resource.setrlimit(resource.RLIMIT_CPU, (LAUGHS_CPU_S, LAUGHS_CPU_S))


def test_billion_laughs_exits_2_in_1_gb(tmp_path: Path) -> None:
    """A 1 KB alias bomb is refused before it expands: exit 2 with the alias named, in a process
    held to 1 GB of memory and a few seconds of CPU (expanded, it would hold 10**9 strings).
    How fast is `make bench`'s."""
    path = tmp_path / "laughs.yaml"
    path.write_bytes(billion_laughs())
    done = subprocess.run([sys.executable, "-m", "faultlab", "validate", str(path)], cwd=REPO,
                          capture_output=True, text=True, timeout=patience(60),
                          preexec_fn=_limit_memory_and_cpu)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert f"{path}:5: lol4[8]: the alias *lol3 expands past {MAX_VALUES} values" in done.stderr
