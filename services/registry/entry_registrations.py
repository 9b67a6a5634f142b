"""What entry modules register, checked against contributes (spec: entry 里的注册和清单里的声明
双向核对). The registry never imports plugin code: a short-lived probe process
(shared/plugin_code/registration_probe.py) runs each register(covel) against a recording
registrar, with no environment of ours but the import path, in the plugin sandbox (its own uid,
namespaces and limits: shared/sandbox/isolation.py), and a time limit per plugin; one that
overruns is killed and the rest are probed afresh. A package whose entry fails
or disagrees is FAILED with the reason, as the hooks service would find it at load. Probed: the
builtin packages at a scan, and any package `covel validate-plugin --probe` names; a community
package's code otherwise runs only once a session approved it (the hooks service checks it then).
"""

from __future__ import annotations

import json
import math
import os
import selectors
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from services.registry.diagnostics import Diagnostic, Severity
from services.registry.loaded_package import LoadedPackage, PackageState
from shared.plugin_code.declarations import (
    ENTRY_LOAD_FAILED_CODE,
    ENTRY_REGISTRATIONS_CODE,
    Registrations,
    declaration_problems,
)
from shared.sandbox.isolation import IsolationConfig
from shared.sandbox.settings import SandboxSettings
from shared.settings import DataDirSetting

if TYPE_CHECKING:
    from services.registry.validation_cache import ValidationCache

# Time for one register(covel), from the probe's ready line; and for the probe's start before it.
PROBE_TIMEOUT_S = 10.0
PROBE_START_TIMEOUT_S = 30.0
# Probe processes at once (each loads its packages one after another).
PROBE_LANES = 4


@dataclass(frozen=True)
class _Answer:
    error: str = ""
    registrations: Registrations | None = None
    hookimpls: bool = False
    # False when the probe gave no answer (a time-out, a probe that died): never kept by a cache.
    given: bool = True


def _declared(package: LoadedPackage) -> Registrations:
    return Registrations(tuple(package.hooks), tuple(package.tools), tuple(package.actions), tuple(package.services),
                         tuple(package.extensions), tuple(package.forms))


def _probe_env() -> dict[str, str]:
    # Only what finding Python modules needs: plugin code sees no settings or secrets of the registry.
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": os.pathsep.join(path for path in sys.path if path),
            "PYTHONDONTWRITEBYTECODE": "1", "COVEL_PROBE": "1"}


def _isolation(roots: list[str]) -> list[str]:
    """The probe's sandbox (argv), as the hooks service's workers have it: what it runs is untrusted (an
    author's `validate-plugin --probe`, or an operator's folder). None when COVEL_SANDBOX_ENABLED=false."""
    settings = SandboxSettings()
    if not settings.sandbox_enabled:
        return []
    return [IsolationConfig.of(settings, roots, DataDirSetting().data_dir).to_arg()]


def _run_probe(packages: list[LoadedPackage], answers: dict[str, _Answer], timeout_s: float) -> list[LoadedPackage]:
    """Probe in order until done or one overruns; the packages not yet answered."""
    requests = [{"pluginId": p.id, "root": str(p.root_dir), "entry": p.entry} for p in packages]
    process = subprocess.Popen(
        [sys.executable, "-m", "shared.plugin_code.registration_probe", *_isolation([str(p.root_dir) for p in packages])],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=_probe_env(), cwd="/",
    )
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write(json.dumps(requests).encode())
    process.stdin.close()
    selector = selectors.DefaultSelector()
    selector.register(process.stdout, selectors.EVENT_READ)
    buffer = b""
    pending = list(packages)
    # Its start (a Python process, its imports, its isolation) has a bound of its own: on a loaded machine, with
    # other probes starting beside it, it may take seconds that are no package's fault.
    deadline, ready = time.monotonic() + PROBE_START_TIMEOUT_S, False
    try:
        while pending:
            if not selector.select(max(deadline - time.monotonic(), 0)):
                stuck = pending.pop(0)
                why = f"register(covel) did not return within {timeout_s:g} s" if ready else \
                    f"the probe that loads it did not start within {PROBE_START_TIMEOUT_S:g} s"
                answers[stuck.id] = _Answer(error=f"{stuck.entry}: {why}", given=False)
                return pending
            chunk = os.read(process.stdout.fileno(), 65536)
            if not chunk:
                stuck = pending.pop(0)
                answers[stuck.id] = _Answer(error=f"{stuck.entry} ended the process that loaded it (exit status {process.wait()})", given=False)
                return pending
            buffer += chunk
            while b"\n" in buffer and pending:
                line, buffer = buffer.split(b"\n", 1)
                answer = json.loads(line)
                if answer.get("ready") is True:
                    deadline, ready = time.monotonic() + timeout_s, True
                    continue
                done = pending.pop(0)
                answers[done.id] = _parse(answer)
                deadline = time.monotonic() + timeout_s
        return []
    finally:
        selector.close()
        process.kill()
        process.wait()
        process.stdout.close()


def _parse(answer: dict[str, Any]) -> _Answer:
    if "error" in answer:
        return _Answer(error=str(answer["error"]))
    return _Answer(registrations=Registrations.from_json(answer["registrations"]), hookimpls=bool(answer.get("hookimpls")))


def probe_entries(packages: list[LoadedPackage], timeout_s: float = PROBE_TIMEOUT_S, lanes: int = PROBE_LANES) -> dict[str, _Answer]:
    """Each package's answer. Probes run in up to `lanes` processes at once, each taking the next few packages when it
    is done, so a package whose import hangs holds up one lane for `timeout_s`, not every package after it."""
    answers: dict[str, _Answer] = {}
    queue = list(packages)
    batch = max(1, math.ceil(len(queue) / (max(1, lanes) * 3)))
    lock = threading.Lock()

    def lane() -> None:
        while True:
            with lock:
                taken, queue[:batch] = queue[:batch], []
            while taken:
                taken = _run_probe(taken, answers, timeout_s)
            if not queue:
                return

    workers = min(max(1, lanes), len(queue)) or 1
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="registration-probe") as pool:
        for done in [pool.submit(lane) for _ in range(workers)]:
            done.result()
    return answers


def check_entry_registrations(packages: list[LoadedPackage], timeout_s: float = PROBE_TIMEOUT_S,
                              cache: ValidationCache | None = None) -> None:
    """Fail each package (whose manifest compiled) with an entry that fails to load or disagrees with contributes.
    `cache`: answers kept for the same files are not probed again."""
    targets = [package for package in packages if package.entry and package.definition]
    if not targets:
        return
    if cache is None:
        answers = probe_entries(targets, timeout_s)
    else:
        answers = cache.probe_answers(targets, lambda missing: probe_entries(missing, timeout_s), lambda answer: answer.given)
    for package in targets:
        answer = answers[package.id]
        if answer.error:
            _fail(package, ENTRY_LOAD_FAILED_CODE, answer.error, "entry", "fix the entry module: the hooks service would not load it either")
            continue
        assert answer.registrations is not None
        # What @hookimpl objects add (hooks, tools) only the hooks service works out; it checks those at load.
        skip = frozenset({"hooks", "tools"}) if answer.hookimpls else frozenset()
        problem = declaration_problems(_declared(package), answer.registrations, skip=skip)
        if problem:
            _fail(package, ENTRY_REGISTRATIONS_CODE, problem, "contributes", "declare in contributes exactly what register(covel) registers")


def _fail(package: LoadedPackage, code: str, message: str, field_path: str, hint: str) -> None:
    package.diagnostics.append(Diagnostic(Severity.ERROR, code, message, file=package.entry, field_path=field_path,
                                          hint=hint, plugin_id=package.id))
    package.state = PackageState.FAILED
    package.runtimes = []
