"""The engine keeps the Attributes of its recently changed Flows only; the rest load on use."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import engine_app
import search_app
from conftest import running_flows
from dex import FlowStatus, StepExecutionId, WaitForStepCompletionOptions
from dex.dexpb import dex_pb2 as pb

from dex_local_engine import EngineLimits, LocalEngine
from dex_local_engine._machine.engine import Engine
from dex_local_engine._store.store import Store


def _text(value: str) -> pb.Value:
    return pb.Value(string_value=value)


def _start(engine: Engine, flow_id: str, **attributes: str) -> None:
    writes = [pb.AttributeWrite(key=k, value=_text(v)) for k, v in attributes.items()]
    engine.start_flow(
        pb.StartFlowRequest(
            flow_id=flow_id,
            flow_type="T",
            request_id=f"request-{flow_id}",
            flow_start_options=pb.FlowStartOptions(attributes=writes),
        )
    )


def _attributes(engine: Engine, flow_id: str) -> dict[str, str]:
    response = engine.get_attributes(pb.GetAttributesRequest(flow_id=flow_id, all_keys=True))
    return {kv.key: kv.value.string_value for kv in response.attributes}


def test_only_the_most_recently_changed_flows_keep_their_attributes_in_memory() -> None:
    engine = Engine(Store(":memory:"), attribute_cache_flows=2)
    for number in range(5):
        _start(engine, f"flow-{number}", name=f"n{number}", extra="x" * number)
    assert engine.attributes_in_memory == 2
    assert {f for f, flow in engine.flows.items() if flow.loaded_attributes is not None} == {
        "flow-3",
        "flow-4",
    }
    # An unloaded Flow's Attributes come back from their rows, whole.
    assert _attributes(engine, "flow-0") == {"name": "n0", "extra": ""}
    assert _attributes(engine, "flow-2") == {"name": "n2", "extra": "xx"}
    assert engine.attributes_in_memory == 2
    # A write to an unloaded Flow lands on its stored Attributes, not on an empty map.
    engine.set_attributes(
        pb.SetAttributesRequest(
            flow_id="flow-1", attributes=[pb.AttributeWrite(key="name", value=_text("renamed"))]
        )
    )
    assert engine.attributes_in_memory == 2
    for number in range(5):
        engine.trim_attributes()
        expected = {"name": "renamed" if number == 1 else f"n{number}", "extra": "x" * number}
        assert _attributes(engine, f"flow-{number}") == expected


def test_steps_and_rpcs_of_many_flows_see_their_own_attributes(tmp_path: Path) -> None:
    # Six Flows share an Attribute cache of two: every RPC and Step task loads its Flow's
    # Attributes from SQLite again, and the totals and results stay each Flow's own.
    limits = EngineLimits(attribute_cache_flows=2)
    with (
        LocalEngine(str(tmp_path / "engine.db"), limits=limits) as engine,
        running_flows(engine_app.flows(), engine.address, str(tmp_path / "cache")) as running,
    ):
        counter = running.flow(engine_app.CounterFlow)
        ids = [f"counter-{number}" for number in range(6)]
        for flow_id in ids:
            running.client.start_flow(counter, flow_id, "total")
        for amount in (1, 2, 3):
            for index, flow_id in enumerate(ids):
                total = running.client.invoke_rpc(counter.add, flow_id, amount * (index + 1))
                assert total == sum(range(1, amount + 1)) * (index + 1)
        for flow_id in ids:
            running.client.invoke_rpc(counter.finish, flow_id)
        for index, flow_id in enumerate(ids):
            result = running.client.wait_for_flow(flow_id)
            assert result.status is FlowStatus.COMPLETED
            assert result.completions[0].decode(str) == f"total:{6 * (index + 1)}"


def test_search_reads_the_indexed_attributes_of_flows_not_in_memory(tmp_path: Path) -> None:
    limits = EngineLimits(attribute_cache_flows=1)
    with (
        LocalEngine(str(tmp_path / "engine.db"), limits=limits) as engine,
        running_flows(search_app.flows(), engine.address, str(tmp_path / "cache")) as running,
    ):
        flow = running.flows[0]
        for number in range(1, 5):
            running.client.start_flow(flow, f"order-{number}", number)
        for number in range(1, 5):
            running.client.wait_for_step_completion(
                f"order-{number}",
                StepExecutionId("Index", 1),
                WaitForStepCompletionOptions(request_timeout=timedelta(seconds=30)),
            )
        (entry,) = running.client.search_flows("OrderLabel = 'order-2'", 10).flows
        assert entry.flow_id == "order-2"
        assert entry.indexed_attributes["OrderAmount"].data == 2
        found = running.client.search_flows("OrderAmount >= 3 ORDER BY OrderAmount", 10).flows
        assert [e.flow_id for e in found] == ["order-3", "order-4"]
