"""JUnit XML of a suite, as GitHub Actions, GitLab and Jenkins display it: one test case per run.

A case is named by its profile (with its repeat number when a profile ran several times) and
timed by its run; a FAIL carries the failed expectations, an ERROR the lab's failure; every case
names its run folder and its files in `system-out`, as Jenkins' attachments plugin reads them
(`[[ATTACHMENT|path]]`), and as properties.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from faultlab.private import redact_text, remember_env_secrets, write_private
from faultlab.report.record import RunRecord

SUITE_NAME = "faultlab"
NOT_XML = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f]")


def render_junit(records: Sequence[RunRecord]) -> str:
    totals = Counter(r.verdict for r in records)
    suites = ET.Element("testsuites", name=SUITE_NAME, tests=str(len(records)),
                        failures=str(totals["FAIL"]), errors=str(totals["ERROR"]),
                        time=f"{sum(r.duration_s for r in records):.3f}")
    suite = ET.SubElement(suites, "testsuite", name=SUITE_NAME, tests=str(len(records)),
                          failures=str(totals["FAIL"]), errors=str(totals["ERROR"]),
                          skipped="0", time=f"{sum(r.duration_s for r in records):.3f}")
    seen: Counter[str] = Counter()
    runs_of = Counter(r.profile for r in records)
    for r in records:
        seen[r.profile] += 1
        name = r.profile if runs_of[r.profile] == 1 else f"{r.profile} #{seen[r.profile]}"
        case = ET.SubElement(suite, "testcase", classname=f"{SUITE_NAME}.{r.backend}", name=name,
                             time=f"{r.duration_s:.3f}", file=r.profile_path)
        properties = ET.SubElement(case, "properties")
        for key, value in (("run_dir", r.run_dir), ("profile_sha256", r.profile_sha256),
                           ("faultlab", r.faultlab)):
            ET.SubElement(properties, "property", name=key, value=value)
        summary = Path(r.run_dir) / "summary.md" if r.run_dir else None
        if r.verdict == "FAIL":
            failed = r.failed_expectations
            failure = ET.SubElement(case, "failure", type="expectation", message="; ".join(
                f"{e['expectation']} (seen: {e['seen']})" for e in failed))
            failure.text = "\n".join(
                [*(f"FAILED {e['expectation']}\n  seen: {e['seen']}" for e in failed),
                 f"summary: {summary}"])
        elif r.verdict == "ERROR":
            error = ET.SubElement(case, "error", type="lab", message=r.error or "the run failed")
            error.text = f"{r.error}\nsummary: {summary}" if summary else r.error
        out = ET.SubElement(case, "system-out")
        out.text = "\n".join([f"run folder: {r.run_dir}" if r.run_dir else "no run folder",
                              *(f"[[ATTACHMENT|{Path(r.run_dir) / name}]]"
                                for name in r.attachments)])
    ET.indent(suites)
    text = ET.tostring(suites, encoding="unicode", xml_declaration=True) + "\n"
    # XML 1.0 has no control characters but tab and newlines, and ElementTree writes them raw (a
    # client's log line with a terminal colour would make the file unreadable).
    return NOT_XML.sub("\ufffd", text)


def write_junit(records: Sequence[RunRecord], path: Path) -> None:
    remember_env_secrets()
    path.parent.mkdir(parents=True, exist_ok=True)
    write_private(path, redact_text(render_junit(records)))
