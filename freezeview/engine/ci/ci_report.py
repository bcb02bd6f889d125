"""``freezeview check`` reports for people and for CI: text, JSON, GitHub, JUnit XML.

GitHub Actions turns ``::error file=...,line=...::message`` lines into annotations on the
pull request's diff, so a violation is shown next to the line that caused it: the source
line freezeview's reason names, mapped from the path recorded on the machine that built
the model to the path in the checkout (:func:`map_source`); without one, the line of the
expectations file that states the rule. JUnit XML has one test case per rule, which most
CI systems show as a test list.
"""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET
from pathlib import Path, PurePosixPath

from .check import CheckReport, Violation

__all__ = ["map_source", "render_github", "render_json", "render_junit", "render_text"]


def map_source(
    recorded: str, source_root: str | Path | None, strip_prefix: str | None = None
) -> Path | None:
    """Where a source path recorded in the model lives in this checkout.

    Args:
        recorded: the file path as the model recorded it (the build machine's).
        source_root: the checkout to look in (None: look only at ``recorded`` itself).
        strip_prefix: a prefix of recorded paths to replace with ``source_root``.

    Returns:
        The existing file: ``recorded`` with ``strip_prefix`` replaced by the root, else
        the longest suffix of ``recorded`` that exists under the root, else ``recorded``
        itself if it exists; None when nothing exists.
    """
    root = Path(source_root) if source_root is not None else None
    if root is not None and strip_prefix and recorded.startswith(strip_prefix):
        candidate = root / recorded[len(strip_prefix) :].lstrip("/\\")
        if candidate.is_file():
            return candidate
    if root is not None:
        parts = PurePosixPath(recorded.replace("\\", "/")).parts
        for start in range(len(parts)):
            tail = [p for p in parts[start:] if p not in ("/", "")]
            if tail and (candidate := root.joinpath(*tail)).is_file():
                return candidate
    direct = Path(recorded)
    return direct if direct.is_file() else None


def _relative(path: Path) -> str:
    try:
        return os.path.relpath(path)
    except ValueError:  # another drive (Windows)
        return str(path)


def _location(
    violation: Violation,
    report: CheckReport,
    line: int,
    source_root: str | Path | None,
    strip_prefix: str | None,
) -> tuple[str, int]:
    reason = violation.reason
    if reason is not None and reason.source and ":" in reason.source:
        recorded, _, number = reason.source.rpartition(":")
        found = map_source(recorded, source_root, strip_prefix)
        if found is not None and number.isdigit():
            return _relative(found), int(number)
    return _relative(Path(report.expectations)), line


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def render_github(
    report: CheckReport,
    source_root: str | Path | None = None,
    strip_prefix: str | None = None,
) -> str:
    """GitHub Actions workflow commands: one ``::error`` per violation, then a summary."""
    lines = []
    for result in report.results:
        if result.note:
            file = _relative(Path(report.expectations))
            title = f"freezeview check: {result.rule.title}"
            lines.append(
                f"::notice file={_escape_property(file)},line={result.rule.line},"
                f"title={_escape_property(title)}::{_escape_data(result.note)}"
            )
        for violation in result.violations:
            file, line = _location(violation, report, result.rule.line, source_root, strip_prefix)
            title = f"freezeview check: {result.rule.title}"
            lines.append(
                f"::error file={_escape_property(file)},line={line},"
                f"title={_escape_property(title)}::{_escape_data(violation.message)}"
            )
    lines.append(_summary(report))
    return "\n".join(lines) + "\n"


def _summary(report: CheckReport) -> str:
    broken = sum(not r.ok for r in report.results)
    count = len(report.violations)
    total = len(report.results)
    if not broken:
        holds = "rule holds" if total == 1 else "rules hold"
        return f"freezeview check: {total} {holds} for {report.model}."
    return (
        f"freezeview check: {broken} of {total} rule{'s' if total != 1 else ''} broken for "
        f"{report.model} ({count} violation{'s' if count != 1 else ''})."
    )


def render_text(report: CheckReport) -> str:
    """Plain text: each broken rule with its violations, one per line, then a summary.

    Rules that hold are only counted (a ResNet's file has hundreds of them), except one
    that held with a note (a latency ratio inside the noise, or held when timed again).
    """
    lines = [
        f"freezeview check: {report.model} against {report.expectations} "
        f"(torch {report.torch_version})"
    ]
    for result in report.results:
        if result.ok:
            if result.note:
                lines.append(f"note line {result.rule.line}: {result.rule.title}")
                lines.append(f"     {result.note}")
            continue
        lines.append(f"FAIL line {result.rule.line}: {result.rule.title}")
        lines.extend(f"     {v.message}" for v in result.violations)
    lines.append(_summary(report))
    return "\n".join(lines) + "\n"


def render_json(report: CheckReport) -> str:
    """The JSON document (``CheckReport.to_json``), indented."""
    return json.dumps(report.to_json(), indent=2) + "\n"


def render_junit(report: CheckReport) -> str:
    """JUnit XML: one ``testsuite`` for the model, one ``testcase`` per rule."""
    failures = sum(not r.ok for r in report.results)
    seconds = f"{report.seconds:.3f}"
    suites = ET.Element(
        "testsuites",
        name="freezeview check",
        tests=str(len(report.results)),
        failures=str(failures),
        errors="0",
        time=seconds,
    )
    suite = ET.SubElement(
        suites,
        "testsuite",
        name=report.model,
        tests=str(len(report.results)),
        failures=str(failures),
        errors="0",
        skipped="0",
        time=seconds,
    )
    properties = ET.SubElement(suite, "properties")
    ET.SubElement(properties, "property", name="expectations", value=report.expectations)
    ET.SubElement(properties, "property", name="torch_version", value=report.torch_version)
    for result in report.results:
        case = ET.SubElement(
            suite,
            "testcase",
            classname=f"freezeview.check.{result.rule.kind}",
            name=f"line {result.rule.line}: {result.rule.title}",
            time="0",
        )
        if result.violations:
            failure = ET.SubElement(
                case,
                "failure",
                message=result.violations[0].message,
                type="freezeview.violation",
            )
            failure.text = "\n".join(v.message for v in result.violations)
    ET.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, "unicode") + "\n"
