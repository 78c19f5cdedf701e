"""faultlab's pytest plugin (entry point `pytest11`, active wherever faultlab is installed).

- `pytest profiles/` collects every faultlab profile (a *.yaml/*.yml whose top level has `name`
  and `client`) as a test named by the profile; it passes when the run PASSes, and a failure
  shows the failed expectations, the lab's error and the run folder.
- The `faultlab` fixture runs a profile (a file, a name such as `silent-loss`, or inline YAML)
  from a test and returns its `RunRecord` (result.json) for the test's own assertions.

Each run is a `faultlab run` process of its own (so it gets root's labs or a user namespace as
the command does, and pytest-xdist workers each run their own labs). Options:
`--faultlab-runs-dir` (default `runs`), `--faultlab-client-image IMAGE`; the ini setting
`faultlab_profiles = false` stops the collection of profiles.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from faultlab.errors import ProfileError
from faultlab.plainyaml import load_plain, read_bounded

if TYPE_CHECKING:
    from faultlab.report.record import RunRecord

SUFFIXES = (".yaml", ".yml")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("faultlab", "faultlab fault-injection profiles")
    group.addoption("--faultlab-runs-dir", default="runs", metavar="DIR",
                    help="where faultlab writes run folders (default: runs)")
    group.addoption("--faultlab-client-image", default=None, metavar="IMAGE",
                    help="run each profile's client as a container of IMAGE")
    parser.addini("faultlab_profiles", type="bool", default=True,
                  help="collect faultlab profiles (*.yaml with name and client) as tests")


def pytest_collect_file(parent: pytest.Collector, file_path: Path) -> pytest.Collector | None:
    if file_path.suffix not in SUFFIXES or not parent.config.getini("faultlab_profiles"):
        return None
    name = profile_name(file_path)
    if name is None:
        return None
    return ProfileFile.from_parent(parent, path=file_path, profile=name)


def profile_name(path: Path) -> str | None:
    """The profile's name, if the file looks like a faultlab profile (else None: other YAML in
    a repository is not collected). A profile with mistakes still counts: its test fails."""
    try:
        _, data = load_plain(read_bounded(path), str(path))
    except (OSError, ProfileError):
        return None
    if not isinstance(data, dict) or "client" not in data or "name" not in data:
        return None
    return str(data["name"])


class ProfileFile(pytest.File):
    def __init__(self, *, profile: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.profile = profile

    def collect(self) -> list[pytest.Item]:
        return [ProfileItem.from_parent(self, name=self.profile)]


class RunFailed(Exception):
    """A profile's run did not PASS."""

    def __init__(self, record: RunRecord) -> None:
        super().__init__(record.verdict)
        self.record = record


class ProfileItem(pytest.Item):
    def runtest(self) -> None:
        record = run_profile(self.path, _runs_dir(self.config),
                             self.config.getoption("--faultlab-client-image"))
        self.user_properties.append(("run_dir", record.run_dir))
        if record.verdict != "PASS":
            raise RunFailed(record)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException],
                     style: Any = None) -> str:
        if isinstance(excinfo.value, RunFailed):
            record = excinfo.value.record
            return "\n".join([f"{record.profile}: {record.verdict}",
                              *record.outcome_lines(failed_only=True),
                              f"  run folder: {record.run_dir}"])
        if isinstance(excinfo.value, ProfileError):
            return "\n".join(excinfo.value.problems)
        return str(super().repr_failure(excinfo))

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, 0, f"faultlab profile {self.name}"


def run_profile(profile: Path | str, runs_dir: Path,
                client_image: str | None = None) -> RunRecord:
    """Run one profile (a file or a name such as `silent-loss`) in a `faultlab run` of its own;
    its record. A profile with mistakes raises its ProfileError."""
    # Imported here: the plugin loads in every pytest session wherever faultlab is installed,
    # and the runner's modules cost ~0.4 s that a session without faultlab's tests never needs.
    from faultlab.catalogue import resolve_profiles
    from faultlab.jobs import RunOptions, run_job
    from faultlab.profile import load_profile

    (path,) = resolve_profiles([profile])
    return run_job(load_profile(path), runs_dir, RunOptions(client_image=client_image))


def _runs_dir(config: pytest.Config) -> Path:
    return Path(config.getoption("--faultlab-runs-dir")).absolute()


class Faultlab:
    """The `faultlab` fixture: `faultlab.run(profile)` with a file, a name (`silent-loss`), or a
    profile's YAML text; returns the run's `RunRecord` (verdict, expectations, run_dir, ...)."""

    def __init__(self, runs_dir: Path, scratch: Path, client_image: str | None) -> None:
        self.runs_dir = runs_dir
        self._scratch = scratch
        self._client_image = client_image

    def run(self, profile: str | Path, client_image: str | None = None) -> RunRecord:
        if isinstance(profile, str) and "\n" in profile:
            inline = self._scratch / f"inline-{len(list(self._scratch.iterdir()))}.yaml"
            inline.write_text(profile)
            profile = inline
        return run_profile(profile, self.runs_dir, client_image or self._client_image)


@pytest.fixture
def faultlab(request: pytest.FixtureRequest, tmp_path: Path) -> Faultlab:
    """Run a faultlab profile from a test: `faultlab.run("silent-loss")`, a path, or YAML."""
    scratch = tmp_path / "faultlab-profiles"
    scratch.mkdir()
    return Faultlab(_runs_dir(request.config), scratch,
                    request.config.getoption("--faultlab-client-image"))
