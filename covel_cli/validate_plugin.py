"""`covel validate-plugin [--probe] <dir|PLUGIN.md|RUNTIME.md>…`: validation of plugin packages.

Static by default: no plugin code runs. `--probe` also runs each entry module's register(covel) in a
sandboxed probe process and checks what it registers against contributes (what the hooks service checks
when it loads the plugin). Runs the registry's validator in this process (no server needed) and prints, per package,
✓ or ✗ with its diagnostics as `file:field: code message (hint)`. Exit status: 0 when no
package has an error, 1 when one has, 2 for bad usage (a path that names no package).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TextIO

from services.registry.diagnostics import Diagnostic
from services.registry.package_validator import NotAPackage, ValidationReport, validate_paths

EXIT_OK, EXIT_ERRORS, EXIT_USAGE = 0, 1, 2


def format_diagnostic(diagnostic: Diagnostic) -> str:
    where = diagnostic.file or "."
    if diagnostic.field_path:
        where += f":{diagnostic.field_path}"
    hint = f" ({diagnostic.hint})" if diagnostic.hint else ""
    return f"{diagnostic.severity.value}: {where}: {diagnostic.code} {diagnostic.message}{hint}"


def print_report(report: ValidationReport, out: TextIO) -> None:
    mark = "✓" if report.ok else "✗"
    print(f"{mark} {report.plugin_id}: {report.root}", file=out)
    for named in report.named:
        print(f"  (named as {named})", file=out)
    if report.ok:
        text, instructions = report.languages()
        print(f"  languages: text {', '.join(text)}; instructions {', '.join(instructions)}", file=out)
    for diagnostic in report.diagnostics:
        print(f"  {format_diagnostic(diagnostic)}", file=out)


def run(paths: list[str], out: TextIO = sys.stdout, err: TextIO = sys.stderr, *, probe: bool = False) -> int:
    if not paths:
        print("covel validate-plugin: name at least one package folder, PLUGIN.md or RUNTIME.md", file=err)
        return EXIT_USAGE
    try:
        reports = validate_paths([Path(path) for path in paths], probe=probe)
    except NotAPackage as error:
        print(f"covel validate-plugin: {error}", file=err)
        return EXIT_USAGE
    for report in reports:
        print_report(report, out)
    failed = [report.plugin_id for report in reports if not report.ok]
    warnings = sum(len(report.warnings) for report in reports)
    summary = f"{len(reports) - len(failed)} of {len(reports)} package(s) valid"
    if warnings:
        summary += f", {warnings} warning(s)"
    print(summary, file=out)
    return EXIT_ERRORS if failed else EXIT_OK


async def command(args: argparse.Namespace) -> int:
    return run(args.paths, probe=args.probe)


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "validate-plugin",
        help="statically validate plugin packages (a folder, its PLUGIN.md, or a RUNTIME.md); no plugin code runs without --probe",
        description="Validate plugin packages statically: manifests, runtimes, files and contributes. No plugin code runs "
                    "unless --probe is given.",
    )
    parser.add_argument("paths", nargs="+", metavar="dir|PLUGIN.md|RUNTIME.md")
    parser.add_argument("--probe", action="store_true",
                        help="also run each entry module's register(covel) (server/index.py) in a sandboxed probe process and "
                             "check what it registers against contributes; this runs the package's code")
    parser.set_defaults(run=command)
