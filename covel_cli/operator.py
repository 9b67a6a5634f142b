"""`covel operator …`: the calls only an operator may make (docs/security.md, Service identity),
sent with the operator's client certificate, and `covel certs`: certificates for a cluster.

The certificate: COVEL_TLS_CERT_FILE / _KEY_FILE / _CA_FILE when set (a cluster's operator
certificate), else the one `covel up` made in its data dir (COVEL_DATA_DIR/pki/operator.pem).
"""

from __future__ import annotations

import argparse
import base64
import io
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

import grpc
import yaml

from covel.hooks.v1 import hooks_pb2, hooks_pb2_grpc
from covel.registry.v1 import registry_pb2, registry_pb2_grpc
from covel.store.v1 import store_pb2, store_pb2_grpc
from covel_cli import operator_plugin_data
from covel_cli.operator_calls import operator_channel
from covel_cli.operator_calls import refused as _refused
from services.registry.importing.importer import read_path
from shared.errors import ServiceError
from shared.security.policy import IDENTITIES, SERVICES
from shared.security.service_identity import DevPki


def zipped(path: Path) -> bytes:
    """A package folder as InstallPackage takes it (one top-level folder named after it), or a zip as is."""
    if path.is_file():
        return path.read_bytes()
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for file in sorted(p for p in path.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
            archive.write(file, f"{path.name}/{file.relative_to(path).as_posix()}")
    return buffer.getvalue()


async def install(args: argparse.Namespace, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    request = registry_pb2.InstallPackageRequest(zip=zipped(Path(args.package)), replace=args.replace)
    async with operator_channel("registry", args.addr) as channel:
        try:
            reply = await registry_pb2_grpc.PluginRegistryStub(channel).InstallPackage(request)
        except grpc.aio.AioRpcError as error:
            return _refused("install", "registry", error, err)
    for diagnostic in reply.diagnostics:
        print(f"  {diagnostic.code}: {diagnostic.message}", file=out)
    if not reply.ok:
        print(f"covel operator install: {args.package} was not installed", file=err)
        return 1
    print(f"installed {reply.plugin_id} into {reply.installed_dir} (catalogue generation {reply.generation})", file=out)
    return 0


async def import_world(args: argparse.Namespace, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    """ImportWorld: the card or lorebook file (or an unpacked CHARX folder) into the registry's first world folder."""
    try:
        data = read_path(Path(args.file))
    except ServiceError as error:
        print(f"covel operator import-world: refused: {error.message}", file=err)
        return 1
    request = registry_pb2.ImportWorldRequest(file=data, world_id=args.world or "", replace=args.replace, merge=args.merge)
    async with operator_channel("registry", args.addr) as channel:
        try:
            reply = await registry_pb2_grpc.PluginRegistryStub(channel).ImportWorld(request)
        except grpc.aio.AioRpcError as error:
            return _refused("import-world", "registry", error, err)
    print(f"imported {reply.world.id} ({reply.world.name}) into {reply.installed_dir} (catalogue generation {reply.generation})", file=out)
    return 0


async def reload(args: argparse.Namespace, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    async with operator_channel("registry", args.addr) as channel:
        try:
            reply = await registry_pb2_grpc.PluginRegistryStub(channel).Reload(registry_pb2.ReloadRequest())
        except grpc.aio.AioRpcError as error:
            return _refused("reload", "registry", error, err)
    # The hooks service follows the registry's generation by itself (WatchCatalogue).
    print(f"reloaded: {reply.plugin_count} packages, catalogue generation {reply.generation}", file=out)
    return 0


async def reset_faults(args: argparse.Namespace, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    request = hooks_pb2.ResetPluginFaultsRequest(session_id=args.session, plugin_id=args.plugin)
    async with operator_channel("hooks", args.addr) as channel:
        try:
            reply = await hooks_pb2_grpc.HookDispatcherStub(channel).ResetPluginFaults(request)
        except grpc.aio.AioRpcError as error:
            return _refused("reset-faults", "hooks", error, err)
    print(f"{args.plugin} in session {args.session}: {'resumed' if reply.was_paused else 'was not paused'}", file=out)
    return 0


async def jobs(args: argparse.Namespace, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    """The detached job queue (docs/retries.md, Detached jobs): by status, one session's or every session's."""
    request = store_pb2.ListDetachedJobsRequest(session_id=args.session or "", statuses=args.status or [], page_size=500)
    async with operator_channel("store", args.addr) as channel:
        stub = store_pb2_grpc.TransactionalStoreStub(channel)
        listed = 0
        while True:
            try:
                page = await stub.ListDetachedJobs(request)
            except grpc.aio.AioRpcError as error:
                return _refused("jobs", "store", error, err)
            for job in page.jobs:
                listed += 1
                print(f"{job.id}  {job.status:<10} {job.runtime_id:<32} session {job.session_id}  attempts {job.attempts}"
                      f"{'  ' + job.error if job.error else ''}", file=out)
            if not page.next_page_token:
                break
            request.page_token = page.next_page_token
    print(f"{listed} job(s)", file=out)
    return 0


async def requeue(args: argparse.Namespace, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    async with operator_channel("store", args.addr) as channel:
        try:
            reply = await store_pb2_grpc.TransactionalStoreStub(channel).RequeueDetachedJob(
                store_pb2.RequeueDetachedJobRequest(job_id=args.job))
        except grpc.aio.AioRpcError as error:
            return _refused("requeue", "store", error, err)
    print(f"{reply.job.id} ({reply.job.runtime_id}) queued again", file=out)
    return 0


def cluster_hosts(namespace: str, cluster_domain: str, public_hosts: list[str]) -> Callable[[str], list[str]]:
    """The names a service's certificate must cover: its Service, short and qualified (and the
    scheduler's public names); the operator's names no host."""
    def hosts_of(identity: str) -> list[str]:
        if identity not in SERVICES:
            return []
        service = f"covel-{identity}"
        names = [service, f"{service}.{namespace}", f"{service}.{namespace}.svc", f"{service}.{namespace}.svc.{cluster_domain}"]
        return names + (public_hosts if identity == "scheduler" else [])
    return hosts_of


def secret_manifests(pki: DevPki, namespace: str) -> str:
    """One Secret per service (tls.crt, tls.key, ca.crt), as deploy/k8s mounts them; the operator's
    certificate stays with the operator."""
    ca = pki.ca_cert.read_bytes()
    secrets = []
    for identity in SERVICES:
        files = pki.files(identity)
        data = {"tls.crt": files.cert.read_bytes(), "tls.key": files.key.read_bytes(), "ca.crt": ca}
        secrets.append({
            "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
            "metadata": {"name": f"covel-{identity}-tls", "namespace": namespace,
                         "labels": {"app.kubernetes.io/part-of": "covel", "app.kubernetes.io/component": identity}},
            "data": {key: base64.b64encode(value).decode() for key, value in data.items()},
        })
    return yaml.safe_dump_all(secrets, sort_keys=False)


def certs(args: argparse.Namespace, out: TextIO = sys.stdout) -> int:
    pki = DevPki(Path(args.out)).ensure(hosts_of=cluster_hosts(args.namespace, args.cluster_domain, args.public_host))
    if args.secrets:
        out.write(secret_manifests(pki, args.namespace))
        return 0
    print(f"CA and certificates of {', '.join(IDENTITIES)} in {pki.folder} (keys readable by you only).", file=out)
    print(f"Secrets for the cluster: covel certs --out {pki.folder} --namespace {args.namespace} --secrets | kubectl apply -f -",
          file=out)
    return 0


async def _certs(args: argparse.Namespace) -> int:
    return certs(args)


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    operator = commands.add_parser("operator", help="operator calls: install and reload packages, import worlds, reset plugin faults, "
                                                     "the detached queue")
    actions = operator.add_subparsers(dest="operator_command", required=True)
    install_cmd = actions.add_parser("install", help="install a community package (a folder or a zip) into the registry")
    install_cmd.add_argument("package", help="the package folder or zip")
    install_cmd.add_argument("--replace", action="store_true", help="replace an installed community package of the same id")
    install_cmd.set_defaults(run=install)
    import_cmd = actions.add_parser("import-world", help="a character card or lorebook into the registry's worlds (ImportWorld)")
    import_cmd.add_argument("file", help="a card (PNG, JSON, CHARX), a lorebook, or an unpacked CHARX folder")
    import_cmd.add_argument("--world", help="the new world's id (default: from the card's name)")
    import_cmd.add_argument("--replace", action="store_true", help="replace a world of the same id in the first world folder")
    import_cmd.add_argument("--merge", action="store_true", help="add the file's lorebook, characters, openings and media to the world --world")
    import_cmd.set_defaults(run=import_world)
    reload_cmd = actions.add_parser("reload", help="rescan the plugin folders (the hooks service follows)")
    reload_cmd.set_defaults(run=reload)
    reset = actions.add_parser("reset-faults", help="resume a plugin whose hooks faults paused in a session")
    reset.add_argument("session")
    reset.add_argument("plugin")
    reset.set_defaults(run=reset_faults)
    jobs_cmd = actions.add_parser("jobs", help="the detached job queue (e.g. --status parked)")
    jobs_cmd.add_argument("--status", action="append", help="only jobs in this status (repeatable): queued, running, parked, failed, …")
    jobs_cmd.add_argument("--session", help="one session's jobs")
    jobs_cmd.set_defaults(run=jobs)
    requeue_cmd = actions.add_parser("requeue", help="queue a parked, failed or timed-out detached job again")
    requeue_cmd.add_argument("job")
    requeue_cmd.set_defaults(run=requeue)
    data_cmds = [(each, "store") for each in operator_plugin_data.add_parser(actions)]
    for each, service in ((install_cmd, "registry"), (import_cmd, "registry"), (reload_cmd, "registry"), (reset, "hooks"), (jobs_cmd, "store"),
                          (requeue_cmd, "store"), *data_cmds):
        each.add_argument("--addr", help=f"{service} address (default: COVEL_{service.upper()}_ADDR)")
    certs_cmd = commands.add_parser("certs", help="a CA and one certificate per service and the operator, for a cluster")
    certs_cmd.add_argument("--out", required=True, help="folder for ca.pem, ca.key and <identity>.pem/.key (kept: run again to renew)")
    certs_cmd.add_argument("--namespace", default="covel", help="the namespace of the covel-* Services (default: covel)")
    certs_cmd.add_argument("--cluster-domain", default="cluster.local", help="the cluster's DNS domain (default: cluster.local)")
    certs_cmd.add_argument("--public-host", action="append", default=[],
                           help="a name clients outside reach the scheduler by (repeatable), for its certificate")
    certs_cmd.add_argument("--secrets", action="store_true", help="print the Kubernetes Secrets (covel-<identity>-tls) instead")
    certs_cmd.set_defaults(run=_certs)
