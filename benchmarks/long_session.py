"""A 2,000-turn session on every runner, with and without compaction: is the per-turn
cost flat?

Each runner's agent answers from a scripted model whose messages have realistic
sizes (a user message of about 400 characters, an answer of about 1,500) for N turns
(default 2,000) on an embedded local engine: Stepwise with a ``ScriptedModelClient``,
each adapter through its conformance factory (its framework's own test model over
the neutral ``ModelScript``; a summary call answers with at most 4,000 characters).
The Worker runs on its own thread with its own event loop, so that thread's CPU
clock is the Worker's. The script queues the messages up to each checkpoint (turns
100, 1,000 and N), then sends the last ``--sample`` turns before it one at a time
and measures after each:

* bytes the next ``RunModel`` loads: the ``AgentMessages`` window plus the chunks
  its input needs (after the summary with compaction; every chunk without);
* the model input: the stored messages after the summary;
* Worker CPU per turn, over the sampled turns;
* the Flow's stored bytes (every Attribute), at the checkpoint.

A checkpoint prints the mean over the sampled turns. Two cycles make single turns
jump: the window fills from 33 to 64 messages before its oldest 32 roll into a chunk,
and compaction lets the input grow from the retained tail (30% of the window) to the
trigger (85%) before it summarizes again. A sample of 40 turns spans both cycles, so
its mean compares checkpoints; one turn's figure does not.

Without compaction (Stepwise only) the model input, and so the ``RunModel`` task,
grows with the session: at these message sizes it passes the Worker's 4 MiB gRPC
message limit near turn 700 and the session stalls, so that run stops at
``--plain-turns`` (default 600).

Usage::

    uv run python benchmarks/long_session.py [--turns N] [--runners NAMES]
        [--context-window TOKENS] [--sample TURNS] [--plain-turns N]
        [--skip-without-compaction] [--json PATH]

Nothing here asserts a time; it measures and prints.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import dex

from dex_agents import AgentSessionFlow, CompactionPolicy, create_agent_session_flow
from dex_agents.models import ModelRequest, ScriptedModelClient, UserTextItem
from dex_agents.runner import CONTEXT_SUMMARY_INSTRUCTIONS
from dex_agents.stepwise import AgentDefinition, StepwiseRunner, session_options_of
from dex_agents.testing import (
    ModelScript,
    ModelTurn,
    ScenarioSession,
    read_stored_attributes,
    stored_attribute_bytes,
)
from dex_agents.values import (
    AgentMessageIndex,
    AgentSessionStartInput,
    AgentUserMessage,
    ContextSummary,
    from_wire_json,
)
from dex_local_engine import LocalEngine

USER_TEXT = (
    "Could you check the status of my order and tell me when it ships? I ordered "
    "two items last week, paid with a card, and the confirmation said three to five "
    "business days, but the tracking page still shows nothing. "
) * 2
ANSWER = (
    "Thanks for your patience. I looked at the order: both items are packed and the "
    "carrier picks them up this afternoon, so tracking updates by tonight. Delivery "
    "is expected within three business days. If anything changes I will tell you. "
) * 6
RUNNERS = ("stepwise", "openai-agents", "pydantic-ai", "langgraph", "claude-sdk")

FlowBuilder = Callable[[CompactionPolicy | None, str, Path, int], AgentSessionFlow]


def last_user_text(request: ModelRequest) -> str:
    texts = [item.text for item in request.items if isinstance(item, UserTextItem)]
    return texts[-1] if texts else ""


def stepwise_script(request: ModelRequest) -> str:
    if request.instructions == CONTEXT_SUMMARY_INSTRUCTIONS:
        # A summary of a realistic, bounded size.
        return "Summary: the user asks about orders; every order was answered. " * 20
    return f"{ANSWER} (re: {last_user_text(request)[-8:]})"


def build_stepwise(
    compaction: CompactionPolicy | None, flow_type: str, directory: Path, turns: int
) -> AgentSessionFlow:
    del directory, turns
    definition = AgentDefinition(
        name="bench",
        instructions="You answer questions about orders.",
        model=ScriptedModelClient(stepwise_script, max_recorded_requests=0),
        compaction=compaction,
    )
    return create_agent_session_flow(
        StepwiseRunner(definition), flow_type, session_options_of(definition)
    )


def adapter_builder(name: str) -> FlowBuilder:
    """A builder over the adapter's conformance factory and its scripted test model."""

    def build(
        compaction: CompactionPolicy | None, flow_type: str, directory: Path, turns: int
    ) -> AgentSessionFlow:
        script = ModelScript([ModelTurn(text=ANSWER) for _ in range(turns)])
        window = compaction.context_window_tokens if compaction is not None else None
        if name == "openai-agents":
            from dex_agents_openai_agents.conformance import build_conformance_flow
        elif name == "pydantic-ai":
            from dex_agents_pydantic_ai.conformance import build_conformance_flow
        elif name == "langgraph":
            from dex_agents_langgraph.conformance import TEXT_TO_JSON_TOKENS, build_conformance_flow

            # The factory scales a scenario's window to LangChain's text count for short
            # scripted messages; undo that, so the model's window is the one asked for.
            window = window * TEXT_TO_JSON_TOKENS if window is not None else None
        elif name == "claude-sdk":
            from dex_agents_claude_sdk.conformance import build_conformance_flow
        else:
            raise ValueError(f"unknown runner {name!r}")
        session = ScenarioSession(flow_type, compaction_context_window_tokens=window)
        return build_conformance_flow(script, [], directory, session)

    return build


@dataclass
class Checkpoint:
    turn: int
    loaded_bytes: float
    loaded_messages: float
    input_messages: float
    loaded_bytes_max: int
    worker_cpu_ms_per_turn: float
    stored_bytes: int
    summary_generation: int | None


class WorkerThread:
    """An ``AsyncWorker`` on its own thread and event loop."""

    def __init__(self, registry: dex.Registry, address: str, cache_directory: str) -> None:
        self._registry = registry
        self._address = address
        self._cache_directory = cache_directory
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._worker: dex.AsyncWorker | None = None
        self._thread = threading.Thread(target=self._run, name="worker", daemon=True)

    def start(self) -> None:
        self._thread.start()
        self._ready.wait(60)

    def cpu_seconds(self) -> float:
        """The Worker thread's CPU clock."""
        ident = self._thread.ident
        assert ident is not None
        return time.clock_gettime(time.pthread_getcpuclockid(ident))

    def _run(self) -> None:
        asyncio.run(self._serve())

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        cache = dex.open_blob_cache(dex.BlobCacheConfig(self._cache_directory, 64 * 1024 * 1024))
        self._worker = dex.AsyncWorker(
            self._registry,
            cache,
            dex.WorkerOptions(
                server_address=self._address, pull=dex.PullWorkerOptions(max_concurrent_tasks=4)
            ),
        )
        serving = asyncio.create_task(self._worker.start())
        await self._worker.wait_pull_registered(timeout=30)
        self._ready.set()
        await serving

    def stop(self) -> None:
        if self._loop is not None and self._worker is not None:
            asyncio.run_coroutine_threadsafe(self._worker.stop(), self._loop).result(60)
        self._thread.join(60)


async def wait_for_turn(
    client: dex.AsyncClient, flow: AgentSessionFlow, session_id: str, target: int, poll: float
) -> None:
    """Return once ``turn-<target>`` completed, reading only the newest events."""
    turn_id = f"turn-{target}"
    while True:
        page = await client.list_stream_messages(session_id, flow.agent_events, 20, "")
        for message in page.messages:
            if message.value.turn_id == turn_id and message.value.type == "turn_failed":
                raise RuntimeError(f"{turn_id} failed: {message.value}")
            if message.value.turn_id == turn_id and message.value.type == "turn_completed":
                return
        await asyncio.sleep(poll)


def loaded_by_next_model_step(stored: dict[str, Any], compaction: bool) -> tuple[int, int, int]:
    """Bytes and messages ``RunModel`` loads (the window and the chunks its input needs),
    and the messages of its input (those after the summary)."""
    summary_value = stored.get("ContextSummary")
    summary = (
        from_wire_json(ContextSummary, summary_value.obj_value.payload)
        if summary_value is not None
        else None
    )
    index_value = stored.get("AgentMessageIndex")
    index = (
        from_wire_json(AgentMessageIndex, index_value.obj_value.payload)
        if index_value is not None
        else None
    )
    after = summary.last_sequence if (compaction and summary is not None) else 0
    total = 0
    messages = 0
    model_input = 0
    for key, value in stored.items():
        if key.startswith("AgentMessages/"):
            total += value.ByteSize()
            messages += 1
            model_input += int(key.partition("/")[2]) > after
    if index is not None:
        for chunk in index.chunks:
            if chunk.last_sequence > after:
                value = stored.get(f"AgentMessageChunks/{chunk.first_sequence:012d}")
                if value is not None:
                    total += value.ByteSize()
                    count = chunk.last_sequence - chunk.first_sequence + 1
                    messages += count
                    model_input += min(count, chunk.last_sequence - after)
    return total, messages, model_input


async def run_session(
    engine: LocalEngine,
    build: FlowBuilder,
    *,
    turns: int,
    sample: int,
    compaction: CompactionPolicy | None,
    label: str,
) -> list[Checkpoint]:
    with tempfile.TemporaryDirectory(prefix="long-session-") as directory:
        flow = build(compaction, f"LongBench{label}", Path(directory), turns)
        registry = dex.Registry([flow], allow_async_handlers=True)
        worker = WorkerThread(registry, engine.address, str(Path(directory) / "worker"))
        worker.start()
        cache = dex.open_blob_cache(
            dex.BlobCacheConfig(str(Path(directory) / "client"), 16 * 1024 * 1024)
        )
        client = dex.AsyncClient(
            registry,
            cache,
            dex.ClientOptions(
                server_address=engine.address, worker_target=dex.WorkerTarget(pull=True)
            ),
        )
        session_id = f"long-{label.lower()}"
        checkpoints: list[Checkpoint] = []

        async def send(turn: int) -> None:
            await client.invoke_rpc(
                flow.send_user_message, session_id, AgentUserMessage(f"{USER_TEXT} {turn}")
            )

        try:
            await client.start_flow(
                flow, session_id, AgentSessionStartInput(initial_message=f"{USER_TEXT} 1")
            )
            sent = 1
            for target in sorted({min(100, turns), min(1000, turns), turns}):
                started = time.monotonic()
                first_sampled = max(sent + 1, target - sample + 1)
                while sent < first_sampled - 1:
                    sent += 1
                    await send(sent)
                # Wait on the latest turn_completed event: a snapshot loads every kept
                # message, and polling it would compete with the Worker for the GIL.
                await wait_for_turn(client, flow, session_id, sent, 0.5)
                cpu_before = worker.cpu_seconds()
                loads: list[tuple[int, int, int]] = []
                stored: dict[str, Any] = {}
                while sent < target:
                    sent += 1
                    await send(sent)
                    await wait_for_turn(client, flow, session_id, sent, 0.02)
                    stored = await read_stored_attributes(engine.address, session_id)
                    loads.append(loaded_by_next_model_step(stored, compaction is not None))
                cpu = (worker.cpu_seconds() - cpu_before) / max(len(loads), 1)
                snapshot = await client.invoke_rpc(flow.get_agent_snapshot, session_id)
                checkpoints.append(
                    Checkpoint(
                        turn=target,
                        loaded_bytes=statistics.fmean(load[0] for load in loads),
                        loaded_messages=statistics.fmean(load[1] for load in loads),
                        input_messages=statistics.fmean(load[2] for load in loads),
                        loaded_bytes_max=max(load[0] for load in loads),
                        worker_cpu_ms_per_turn=cpu * 1000,
                        stored_bytes=stored_attribute_bytes(stored),
                        summary_generation=(
                            snapshot.context_summary.generation
                            if snapshot.context_summary
                            else None
                        ),
                    )
                )
                print(
                    f"  {label}: turn {target} reached "
                    f"({time.monotonic() - started:.1f} s for this stretch)",
                    flush=True,
                )
        finally:
            await client.close()
            worker.stop()
    return checkpoints


def print_table(label: str, checkpoints: Sequence[Checkpoint]) -> None:
    print(f"\n{label} (means over the sampled turns)")
    print(
        f"{'turn':>6} {'loaded KiB':>11} {'max KiB':>8} {'loaded msgs':>12} {'input msgs':>11} "
        f"{'CPU ms/turn':>12} {'stored KiB':>11} {'summary gen':>12}"
    )
    for point in checkpoints:
        print(
            f"{point.turn:>6} {point.loaded_bytes / 1024:>11.1f} "
            f"{point.loaded_bytes_max / 1024:>8.1f} {point.loaded_messages:>12.1f} "
            f"{point.input_messages:>11.1f} {point.worker_cpu_ms_per_turn:>12.2f} "
            f"{point.stored_bytes / 1024:>11.1f} "
            f"{point.summary_generation if point.summary_generation is not None else '-':>12}"
        )
    first, last = checkpoints[0], checkpoints[-1]
    if first.worker_cpu_ms_per_turn > 0:
        print(
            f"turn {last.turn} / turn {first.turn}: loaded bytes "
            f"{last.loaded_bytes / max(first.loaded_bytes, 1):.2f}x, Worker CPU "
            f"{last.worker_cpu_ms_per_turn / first.worker_cpu_ms_per_turn:.2f}x"
        )


def builder_for(name: str) -> FlowBuilder:
    return build_stepwise if name == "stepwise" else adapter_builder(name)


async def main() -> None:
    parser = argparse.ArgumentParser(description="A long session, with and without compaction.")
    parser.add_argument("--turns", type=int, default=2000)
    parser.add_argument(
        "--runners", default=",".join(RUNNERS), help=f"comma-separated, of {', '.join(RUNNERS)}"
    )
    parser.add_argument("--context-window", type=int, default=32_000)
    parser.add_argument(
        "--sample", type=int, default=40, help="turns measured one by one before a checkpoint"
    )
    parser.add_argument("--skip-without-compaction", action="store_true")
    parser.add_argument(
        "--plain-turns",
        type=int,
        default=600,
        help="turns of the Stepwise run without compaction; at these message sizes it stalls"
        " near turn 700, when the RunModel task passes the Worker's 4 MiB gRPC message limit",
    )
    parser.add_argument("--json", type=Path, default=None)
    arguments = parser.parse_args()
    names = [name.strip() for name in arguments.runners.split(",") if name.strip()]
    unknown = sorted(set(names) - set(RUNNERS))
    if unknown:
        parser.error(f"unknown runners: {', '.join(unknown)}")
    results: dict[str, list[dict[str, Any]]] = {}
    with LocalEngine(database=":memory:", port=0) as engine:
        policy = CompactionPolicy(context_window_tokens=arguments.context_window)
        for name in names:
            label = "".join(part.title() for part in name.split("-"))
            points = await run_session(
                engine,
                builder_for(name),
                turns=arguments.turns,
                sample=arguments.sample,
                compaction=policy,
                label=label,
            )
            print_table(
                f"{name} with compaction (context window {arguments.context_window} tokens)",
                points,
            )
            results[f"{name}_with_compaction"] = [asdict(point) for point in points]
        if not arguments.skip_without_compaction and "stepwise" in names:
            without = await run_session(
                engine,
                build_stepwise,
                turns=arguments.plain_turns,
                sample=arguments.sample,
                compaction=None,
                label="Plain",
            )
            print_table("stepwise without compaction", without)
            results["stepwise_without_compaction"] = [asdict(point) for point in without]
    if arguments.json is not None:
        arguments.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
