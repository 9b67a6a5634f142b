"""The in-app world generator through the real services (issue 40): GenerateWorldData asks the model, per contract
an installed plugin's namespace declares `authoring.generate` for, for records that fit the namespace's schema; a
contract whose example cannot be read or whose answer does not fit is skipped, named with the reason, and the
others are generated all the same."""

from __future__ import annotations

import grpc
import pytest
import pytest_asyncio

from covel.scheduler.v1 import scheduler_pb2, scheduler_pb2_grpc
from shared.grpc_client import open_channel
from shared.settings import REPO_ROOT
from shared.structs import from_struct
from tests.e2e.conftest import TEST_PLUGIN_DIR, restart_gateway, running_services

pytestmark = pytest.mark.asyncio(loop_scope="session")
GENERATOR_PLUGINS = REPO_ROOT / "tests" / "fixtures" / "world-gen"
PROBE = "gen-probe"
SIGHTS = [
    {"id": "tide-bell", "name": "The tide bell", "text": "It rings when the sea comes back."},
    {"id": "salt-stair", "name": "The salt stair", "text": "Its steps are white with salt."},
]


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def generator_services(tmp_path_factory):
    async with running_services(
        tmp_path_factory.mktemp("world-gen"), plugin_dirs=(TEST_PLUGIN_DIR, GENERATOR_PLUGINS), script={}
    ) as group:
        yield group


async def generate(services, **fields) -> scheduler_pb2.GenerateWorldDataResponse:
    async with open_channel(services.addrs["scheduler"]) as channel:
        return await scheduler_pb2_grpc.SchedulerStub(channel).GenerateWorldData(scheduler_pb2.GenerateWorldDataRequest(**fields))


async def test_each_generable_contract_is_generated_and_a_failure_skips_only_its_own(generator_services) -> None:
    # Calls in order of (plugin, namespace): legends never reaches the model (its example is missing), omens
    # answers a record without its required name, sights answers two good records.
    await restart_gateway(
        generator_services,
        {
            "queues": {
                "world-generator": [
                    {"json": {"records": [{"id": "crow", "text": "Crows gather."}]}},
                    {"json": {"records": SIGHTS}},
                ]
            }
        },
    )
    reply = await generate(
        generator_services,
        premise="A drowned city that surfaces at low tide.",
        contracts=["gen.sights@1", "gen.legends@1", "gen.omens@1", "gen.notes@1"],
    )
    assert [(d.contract, d.plugin_id, d.namespace) for d in reply.data] == [("gen.sights@1", PROBE, "sights")]
    assert [from_struct(record) for record in reply.data[0].records] == SIGHTS
    skipped = {s.contract: (s.plugin_id, s.namespace, s.reason) for s in reply.skipped}
    assert set(skipped) == {"gen.legends@1", "gen.omens@1"}, "gen.notes@1 declares no generate: not a target"
    assert skipped["gen.legends@1"][:2] == (PROBE, "legends") and skipped["gen.legends@1"][2].startswith(
        "example: ./examples/legends.yaml cannot be read"
    )
    assert skipped["gen.omens@1"][2] == "records[0] does not fit the schema: 'name' is a required property"
    lines = (generator_services.log_dir / "scheduler.log").read_text(encoding="utf-8")
    assert '"world_generator.skipped"' in lines and '"world_generator.generated"' in lines


async def test_a_premise_is_required(generator_services) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await generate(generator_services, premise="  ")
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
