"""What a sandbox worker gives up before any plugin code runs (docs/security.md, "Plugin sandbox").

The host starts a worker (`python -m shared.sandbox.worker`, or the registry's probe) with a
scrubbed environment and an `IsolationConfig`; the worker calls `enter` first thing. In order:
the plugin folders are opened (so they stay reachable as /proc/self/fd/N after the uid drop, even
below a folder only root may enter); private PID, mount and network namespaces where the kernel allows
(the worker is PID 1 of its own, with its own /proc; a network of its own with only a loopback
that is down, so plugin code reaches no service, database or address of any kind: covel.http is
sent by the host, shared/sandbox/http_gate.py; an empty tmpfs over the data dir, /tmp and /run,
with Python's own folders below them bound back read-only and the worker's `writable` folders
bound back at their own paths: the hooks service's session workspaces of that plugin,
services/hooks/plugin_side/environments.py); resource limits; then, when
started as root, the sandbox uid and gid, no new privileges. The host makes the writable folders
and gives them to the sandbox uid first (`prepare_writable`).
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import json
import os
import resource
import signal
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from shared.sandbox.settings import SandboxSettings

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
MS_RDONLY, MS_REMOUNT = 1, 32
MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_BIND, MS_REC, MS_PRIVATE = 2, 4, 8, 4096, 16384, 1 << 18
PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_SET_NO_NEW_PRIVS = 1, 4, 38
# CPU seconds between the soft limit (SIGXCPU: the worker asks to be replaced) and the hard one (SIGKILL).
CPU_GRACE_S = 30
# Environment variables a worker keeps: finding programs and modules, the locale. Nothing of COVEL_*.
KEPT_ENV = ("PATH", "LANG", "LC_ALL", "TZ")
# Covered by an empty tmpfs besides the data dir: the host's scratch files and sockets (/run: the
# services' and databases' Unix sockets; /dev/shm: shared memory).
HIDDEN_ALWAYS = ("/tmp", "/run", "/dev/shm")


@dataclass
class IsolationConfig:
    roots: list[str] = field(default_factory=list)
    uid: int | None = None
    gid: int | None = None
    namespaces: bool = True
    # A network namespace of its own (with the other namespaces).
    network: bool = True
    # Folders covered by an empty tmpfs in the worker's mount namespace (the data dir, /tmp).
    hidden: list[str] = field(default_factory=list)
    memory_bytes: int = 0
    cpu_s: int = 0
    open_files: int = 0
    processes: int = 0
    # Folders the worker may write, reachable at their own paths even below a hidden one (only this plugin's).
    writable: list[str] = field(default_factory=list)

    def to_arg(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_arg(cls, text: str) -> IsolationConfig:
        return cls(**json.loads(text))

    @classmethod
    def of(cls, settings: SandboxSettings, roots: list[str], data_dir: Path | None, writable: Sequence[str] = ()) -> IsolationConfig:
        dropping = os.geteuid() == 0 and settings.sandbox_drop_privileges
        candidates = [*([data_dir] if data_dir is not None else []), *(Path(path) for path in HIDDEN_ALWAYS)]
        hidden = hidden_dirs(candidates) if settings.sandbox_hide_dirs else []
        return cls(
            roots=roots, uid=settings.sandbox_uid if dropping else None, gid=settings.sandbox_gid if dropping else None,
            namespaces=settings.sandbox_namespaces, network=settings.sandbox_network_isolation, hidden=hidden, memory_bytes=settings.sandbox_memory_mb * 1024 * 1024,
            cpu_s=settings.sandbox_cpu_s, open_files=settings.sandbox_open_files,
            processes=settings.sandbox_processes if dropping else 0, writable=list(writable),
        )


def prepare_writable(config: IsolationConfig) -> list[str]:
    """The host's part: each writable folder made, and given to the sandbox uid when the worker drops to it.
    A folder that cannot be is left out of `config.writable`; the problems are returned."""
    kept, problems = [], []
    for folder in config.writable:
        try:
            os.makedirs(folder, mode=0o700, exist_ok=True)
            if config.uid is not None and os.stat(folder).st_uid != config.uid:
                os.chown(folder, config.uid, config.gid if config.gid is not None else config.uid)
        except OSError as error:
            problems.append(f"{folder}: {error.strerror or error}")
            continue
        kept.append(folder)
    config.writable = kept
    return problems


@dataclass
class Isolation:
    """What `enter` achieved: the plugin folders as this process reaches them, and a report for the log."""

    roots: dict[str, str]
    report: dict[str, Any]

    def path_of(self, root: str) -> str:
        """Where the worker reaches a plugin folder the host named (the host's path when it was not opened)."""
        return self.roots.get(root, root)


def python_paths() -> list[Path]:
    """Python's own folders: the interpreter's, the import path's, this checkout's."""
    needed = [Path(sys.prefix), Path(sys.base_prefix), Path(sys.executable).parent, Path(sys.executable).resolve().parent,
              Path(__file__).parent.parent.parent, *(Path(p) for p in sys.path if p)]
    found: list[Path] = []
    for path in needed:
        resolved = path.resolve()
        if resolved.is_dir() and resolved not in found:
            found.append(resolved)
    return found


def hidden_dirs(candidates: list[Path]) -> list[str]:
    """The candidates that are not Python's own folder nor inside one (a folder of Python's
    below a hidden one, e.g. a checkout under /tmp, is bound back read-only in the worker)."""
    needed = python_paths()
    chosen: list[str] = []
    for candidate in candidates:
        folder = candidate.resolve()
        if not any(folder == path or path in folder.parents for path in needed) and str(folder) not in chosen:
            chosen.append(str(folder))
    return chosen


def worker_env(passed: Sequence[str] = ()) -> dict[str, str]:
    """The whole environment of a worker: no settings or secrets of the service, only the import path
    (and the variables `passed` names, COVEL_SANDBOX_PASS_ENV)."""
    env = {name: os.environ[name] for name in (*KEPT_ENV, *passed) if name in os.environ}
    env.setdefault("PATH", "/usr/bin:/bin")
    env.update({
        "PYTHONPATH": os.pathsep.join(path for path in sys.path if path),
        "PYTHONDONTWRITEBYTECODE": "1",
        # Few malloc arenas: threads would otherwise reserve most of the address-space limit.
        "MALLOC_ARENA_MAX": "2",
        "HOME": "/nonexistent",
        "TMPDIR": "/tmp",
    })
    return env


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")


def _open_roots(roots: list[str]) -> dict[str, str]:
    opened = {}
    for root in roots:
        try:
            fd = os.open(root, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError:
            continue  # loading from it fails later with the plugin's own message
        opened[root] = f"/proc/self/fd/{fd}"
    return opened


def _open_import_path() -> dict[str, str]:
    """The import path's folders, opened now, as `_open_roots` opens the plugin folders: Python's own library
    may sit below a folder only root may enter (/root/.pyenv), and a module not imported before the uid drop
    (difflib, pprint, ...) must still be found after it."""
    folders = [path for path in sys.path if path and os.path.isdir(path)]
    return _open_roots(folders)


def _reach_import_path(opened: dict[str, str]) -> list[str]:
    """After the uid drop: every import-path folder this uid cannot enter by its name, by its descriptor."""
    rerouted = []
    for index, path in enumerate(sys.path):
        if path in opened and not os.access(path, os.R_OK | os.X_OK):
            sys.path[index] = opened[path]
            rerouted.append(path)
    if rerouted:
        _reach_package_paths({path: opened[path] for path in rerouted})
        importlib.invalidate_caches()
    return rerouted


def _reach_package_paths(moved: dict[str, str]) -> None:
    """Packages imported before the drop (json, email, ...) find their submodules by their own __path__."""
    for module in list(sys.modules.values()):
        paths = getattr(module, "__path__", None)
        if not isinstance(paths, list):
            continue
        for index, path in enumerate(paths):
            origin = next((old for old in moved if path == old or path.startswith(old + os.sep)), None)
            if origin is not None:
                paths[index] = moved[origin] + path[len(origin):]


def _reach_writable(opened: dict[str, str]) -> dict[str, str]:
    """After the uid drop: each writable folder by its path when this process may write there, else by its descriptor."""
    return {path: path if os.access(path, os.W_OK | os.X_OK) else reached for path, reached in opened.items()}


def _write(path: str, text: str) -> None:
    with open(path, "w") as file:
        file.write(text)


def _unshare(libc: ctypes.CDLL, network: bool, report: dict[str, Any]) -> None:
    """New mount and PID namespaces, and a network one when `network` and the kernel allows; as a
    non-root user, inside a user namespace of its own. report["network"] says which."""
    rootless = os.geteuid() != 0
    uid, gid = os.geteuid(), os.getegid()
    flags = CLONE_NEWNS | CLONE_NEWPID | (CLONE_NEWUSER if rootless else 0)
    report["network"] = "shared (COVEL_SANDBOX_NETWORK_ISOLATION=false)"
    if network:
        if libc.unshare(flags | CLONE_NEWNET) == 0:
            report["network"] = "isolated"
            flags = 0
        else:
            errno = ctypes.get_errno()
            report["network"] = f"shared (a network namespace: {os.strerror(errno)})"
    if flags:
        _check(libc.unshare(flags), "unshare")
    if not rootless:
        return
    _write("/proc/self/setgroups", "deny")
    _write("/proc/self/uid_map", f"0 {uid} 1")
    _write("/proc/self/gid_map", f"0 {gid} 1")


def network_probe(settings: SandboxSettings) -> list[str] | None:
    """The argv of a process that exits 0 when it could make a network namespace as a worker does
    (the host's check at start), or None when the settings give workers none."""
    if not (settings.sandbox_namespaces and settings.sandbox_network_isolation):
        return None
    flags = CLONE_NEWNET | (0 if os.geteuid() == 0 else CLONE_NEWUSER)
    code = f"import ctypes, sys; sys.exit(0 if ctypes.CDLL(None).unshare({flags}) == 0 else 1)"
    return [sys.executable, "-S", "-I", "-c", code]


def _become_pid_one() -> None:
    """Fork into the new PID namespace. The parent stays outside only to pass on the exit status;
    the child dies with it (the host stops a worker by killing its direct child)."""
    child = os.fork()
    if child:
        signal.signal(signal.SIGTERM, lambda *_: os.kill(child, signal.SIGKILL))
        _, status = os.waitpid(child, 0)
        os._exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status))
    # (Its parent shows as pid 0 from inside. Killed before this line, it still ends at the channel's EOF.)
    _check(_libc().prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "prctl(PDEATHSIG)")


def _mount_private(libc: ctypes.CDLL, hidden: list[str], writable: list[str]) -> list[str]:
    _check(libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None), "mount --make-rprivate /")
    _check(libc.mount(b"proc", b"/proc", b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None), "mount /proc")
    # Opened in this mount namespace (a bind mount's source must be in it), before the tmpfs covers them.
    kept = _open_roots([path for path in writable if any(_below(path, folder) for folder in hidden)])
    python = _open_roots(_outermost([str(path) for path in python_paths() if any(_below(str(path), folder) for folder in hidden)]))
    covered = []
    for path in hidden:
        if Path(path).is_dir():
            _check(libc.mount(b"tmpfs", path.encode(), b"tmpfs", MS_NOSUID | MS_NODEV, b"size=16m,mode=1777"), f"mount tmpfs {path}")
            covered.append(path)
    for path, reached in python.items():
        _bind(libc, path, reached)
        # Read-only; the flags the mount had (nosuid, nodev, noexec) are kept, or the kernel refuses.
        # Left writable where the kernel refuses (the sandbox uid still cannot write root's files).
        flags = os.statvfs(path).f_flag & (MS_NOSUID | MS_NODEV | MS_NOEXEC)
        libc.mount(None, path.encode(), None, MS_BIND | MS_REMOUNT | MS_RDONLY | flags, None)
    for path, reached in kept.items():
        _bind(libc, path, reached)
    return covered


def _bind(libc: ctypes.CDLL, path: str, reached: str) -> None:
    os.makedirs(path, exist_ok=True)
    _check(libc.mount(reached.encode(), path.encode(), None, MS_BIND | MS_REC, None), f"mount --bind {path}")
    os.close(int(reached.rsplit("/", 1)[1]))


def _outermost(paths: list[str]) -> list[str]:
    """The paths that are not inside another of them."""
    return [path for path in paths if not any(other != path and _below(path, other) for other in paths)]


def _below(path: str, folder: str) -> bool:
    return Path(path).resolve().is_relative_to(Path(folder).resolve())


def _lock_mounts(libc: ctypes.CDLL) -> None:
    """As a non-root user the worker is root of its user namespace and could unmount what covers the
    data dir: a nested user and mount namespace locks those mounts in place."""
    _check(libc.unshare(CLONE_NEWUSER | CLONE_NEWNS), "unshare (lock mounts)")
    _write("/proc/self/setgroups", "deny")
    _write("/proc/self/uid_map", "0 0 1")
    _write("/proc/self/gid_map", "0 0 1")


def _namespaces(config: IsolationConfig, report: dict[str, Any]) -> None:
    libc = _libc()
    rootless = os.geteuid() != 0
    try:
        _unshare(libc, config.network, report)
    except OSError as error:
        report["namespaces"] = f"unavailable ({error.strerror}); running without a private /proc"
        report["network"] = "shared (no namespaces)"
        return
    _become_pid_one()
    report["hidden"] = _mount_private(libc, config.hidden, config.writable)
    if rootless:
        _lock_mounts(libc)
    report["namespaces"] = "pid+mount" + ("+net" if report["network"] == "isolated" else "") + ("+user" if rootless else "")


def _limits(config: IsolationConfig) -> None:
    if config.memory_bytes:
        resource.setrlimit(resource.RLIMIT_AS, (config.memory_bytes, config.memory_bytes))
    if config.cpu_s:
        resource.setrlimit(resource.RLIMIT_CPU, (config.cpu_s, config.cpu_s + CPU_GRACE_S))
    if config.open_files:
        resource.setrlimit(resource.RLIMIT_NOFILE, (config.open_files, config.open_files))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def _drop_privileges(config: IsolationConfig) -> None:
    libc = _libc()
    if config.uid is not None and os.geteuid() == 0:
        if config.processes:
            # Counted per uid (every worker of the machine): a bound on fork bombs, not a quota.
            resource.setrlimit(resource.RLIMIT_NPROC, (config.processes, config.processes))
        os.setgroups([])
        os.setgid(config.gid if config.gid is not None else config.uid)
        os.setuid(config.uid)
        # A uid change makes the process undumpable, which would close /proc/self/fd (the plugin folders) to it.
        _check(libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0), "prctl(DUMPABLE)")
    _check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(NO_NEW_PRIVS)")


def enter(config: IsolationConfig) -> Isolation:
    """Isolate this process (see the module doc); the report says what the kernel allowed."""
    report: dict[str, Any] = {"namespaces": "off", "hidden": [], "network": "shared (no namespaces)"}
    roots = _open_roots(config.roots)
    # Reached by descriptor only when the uid dropped to cannot enter them by their paths.
    writable = _open_roots(config.writable)
    import_path = _open_import_path() if config.uid is not None else {}
    if config.namespaces:
        _namespaces(config, report)
    _limits(config)
    _drop_privileges(config)
    report["import_path_by_descriptor"] = _reach_import_path(import_path)
    roots.update(_reach_writable(writable))
    if report["namespaces"] != "off" and not str(report["namespaces"]).startswith("unavailable"):
        # A uid change clears the parent-death signal (prctl(2)): set it again, or a worker busy in
        # plugin code outlives a killed host as an orphan (seen: a hanging register() probe, for hours).
        _check(_libc().prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "prctl(PDEATHSIG)")
    with contextlib.suppress(OSError):
        os.chdir("/")
    report.update(uid=os.getuid(), gid=os.getgid(), pid=os.getpid())
    return Isolation(roots, report)
