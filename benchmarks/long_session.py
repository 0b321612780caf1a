"""A 2,000-turn session, with and without compaction: is the per-turn cost flat?

A Stepwise agent with a scripted model whose messages have realistic sizes (a
user message of about 400 characters, an answer of about 1,500) runs N turns
(default 2,000) on an embedded local engine. The Worker runs on its own thread
with its own event loop, so that thread's CPU time is the Worker's. The script
queues the messages up to each checkpoint (turns 100, 1,000 and N), waits for the
session to finish them, and measures at the checkpoint:

* bytes loaded by the next ``RunModel``: the ``AgentMessages`` window plus the
  chunks its input needs (after the summary with compaction; every chunk without);
* the model input: messages and their JSON bytes, in the last ``RunModel``;
* Worker CPU per turn, averaged over the 20 turns before the checkpoint, measured
  between consecutive ``RunModel`` starts (one turn is ``AwaitUserMessage`` plus
  ``RunModel``, and ``CompactContext`` when it compacts);
* the Flow's stored bytes (every Attribute).

Without compaction the model input, and so the ``RunModel`` task, grows with the
session: at these message sizes it passes the Worker's 4 MiB gRPC message limit
near turn 700 and the session stalls, so that run stops at ``--plain-turns``
(default 600).

Usage::

    uv run python benchmarks/long_session.py [--turns N] [--context-window TOKENS]
        [--plain-turns N] [--skip-without-compaction] [--json PATH]

Nothing here asserts a time; it measures and prints.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import dex

from dex_agents import (
    AgentMessageIndex,
    AgentSessionStartInput,
    AgentTurnContext,
    AgentTurnOutcome,
    AgentUserMessage,
    CompactionPolicy,
    ContextSummary,
    from_wire_json,
)
from dex_agents.models import ModelRequest, ScriptedModelClient, UserTextItem
from dex_agents.session import AgentSessionFlow, create_agent_session_flow
from dex_agents.stepwise import AgentDefinition, StepwiseRunner, session_options_of
from dex_agents.testing.attributes import read_stored_attributes, stored_attribute_bytes
from dex_agents.texts import CONTEXT_SUMMARY_INSTRUCTIONS
from dex_agents.values import to_wire_json
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
CPU_WINDOW = 20


def last_user_text(request: ModelRequest) -> str:
    texts = [item.text for item in request.items if isinstance(item, UserTextItem)]
    return texts[-1] if texts else ""


def script(request: ModelRequest) -> str:
    if request.instructions == CONTEXT_SUMMARY_INSTRUCTIONS:
        # A summary of a realistic, bounded size.
        return "Summary: the user asks about orders; every order was answered. " * 20
    return f"{ANSWER} (re: {last_user_text(request)[-8:]})"


class MeasuredRunner(StepwiseRunner):
    """Records, per ``RunModel``, the Worker thread's CPU clock and the model input size."""

    def __init__(self, definition: AgentDefinition) -> None:
        super().__init__(definition)
        self.cpu_at_model_step: list[float] = []
        self.input_messages: list[int] = []
        self.input_bytes: list[int] = []

    async def run_model_step(self, turn: AgentTurnContext) -> AgentTurnOutcome:
        self.cpu_at_model_step.append(time.thread_time())
        self.input_messages.append(len(turn.messages))
        self.input_bytes.append(sum(len(to_wire_json(message)) for message in turn.messages))
        return await super().run_model_step(turn)


@dataclass
class Checkpoint:
    turn: int
    loaded_bytes: int
    loaded_messages: int
    input_messages: int
    input_bytes: int
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
    client: dex.AsyncClient, flow: AgentSessionFlow, session_id: str, target: int
) -> None:
    """Return once ``turn-<target>`` completed, reading only the newest events."""
    turn_id = f"turn-{target}"
    while True:
        page = await client.list_stream_messages(session_id, flow.agent_events, 20, "")
        if any(
            message.value.type == "turn_completed" and message.value.turn_id == turn_id
            for message in page.messages
        ):
            return
        await asyncio.sleep(0.5)


def loaded_by_next_model_step(stored: dict[str, Any], compaction: bool) -> tuple[int, int]:
    """Bytes and messages ``RunModel`` loads: the window and the chunks its input needs."""
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
    for key, value in stored.items():
        if key.startswith("AgentMessages/"):
            total += value.ByteSize()
            messages += 1
    if index is not None:
        for chunk in index.chunks:
            if chunk.last_sequence > after:
                value = stored.get(f"AgentMessageChunks/{chunk.first_sequence:012d}")
                if value is not None:
                    total += value.ByteSize()
                    messages += chunk.last_sequence - chunk.first_sequence + 1
    return total, messages


async def run_session(
    engine: LocalEngine, *, turns: int, compaction: CompactionPolicy | None, label: str
) -> list[Checkpoint]:
    definition = AgentDefinition(
        name="bench",
        instructions="You answer questions about orders.",
        model=ScriptedModelClient(script, max_recorded_requests=0),
        compaction=compaction,
    )
    runner = MeasuredRunner(definition)
    flow: AgentSessionFlow = create_agent_session_flow(
        runner, f"LongBench{label}", session_options_of(definition)
    )
    registry = dex.Registry([flow], allow_async_handlers=True)
    with tempfile.TemporaryDirectory(prefix="long-session-") as directory:
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
        try:
            await client.start_flow(
                flow, session_id, AgentSessionStartInput(initial_message=f"{USER_TEXT} 1")
            )
            sent = 1
            for target in sorted({min(100, turns), min(1000, turns), turns}):
                while sent < target:
                    sent += 1
                    await client.invoke_rpc(
                        flow.send_user_message, session_id, AgentUserMessage(f"{USER_TEXT} {sent}")
                    )
                started = time.monotonic()
                # Wait on the latest turn_completed event: a snapshot loads every kept
                # message, and polling it would compete with the Worker for the GIL.
                await wait_for_turn(client, flow, session_id, target)
                snapshot = await client.invoke_rpc(flow.get_agent_snapshot, session_id)
                stored = await read_stored_attributes(engine.address, session_id)
                loaded, loaded_messages = loaded_by_next_model_step(stored, compaction is not None)
                cpu = runner.cpu_at_model_step
                window = cpu[-CPU_WINDOW:]
                per_turn = (window[-1] - window[0]) / (len(window) - 1) if len(window) > 1 else 0.0
                checkpoints.append(
                    Checkpoint(
                        turn=target,
                        loaded_bytes=loaded,
                        loaded_messages=loaded_messages,
                        input_messages=runner.input_messages[-1],
                        input_bytes=runner.input_bytes[-1],
                        worker_cpu_ms_per_turn=per_turn * 1000,
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
    print(f"\n{label}")
    print(
        f"{'turn':>6} {'loaded KiB':>11} {'loaded msgs':>12} {'input msgs':>11} "
        f"{'input KiB':>10} {'CPU ms/turn':>12} {'stored KiB':>11} {'summary gen':>12}"
    )
    for point in checkpoints:
        print(
            f"{point.turn:>6} {point.loaded_bytes / 1024:>11.1f} {point.loaded_messages:>12} "
            f"{point.input_messages:>11} {point.input_bytes / 1024:>10.1f} "
            f"{point.worker_cpu_ms_per_turn:>12.2f} {point.stored_bytes / 1024:>11.1f} "
            f"{point.summary_generation if point.summary_generation is not None else '-':>12}"
        )
    first, last = checkpoints[0], checkpoints[-1]
    if first.worker_cpu_ms_per_turn > 0:
        print(
            f"turn {last.turn} / turn {first.turn}: loaded bytes "
            f"{last.loaded_bytes / max(first.loaded_bytes, 1):.2f}x, Worker CPU "
            f"{last.worker_cpu_ms_per_turn / first.worker_cpu_ms_per_turn:.2f}x"
        )


async def main() -> None:
    parser = argparse.ArgumentParser(description="A long session, with and without compaction.")
    parser.add_argument("--turns", type=int, default=2000)
    parser.add_argument("--context-window", type=int, default=32_000)
    parser.add_argument("--skip-without-compaction", action="store_true")
    parser.add_argument(
        "--plain-turns",
        type=int,
        default=600,
        help="turns of the run without compaction; at these message sizes it stalls near"
        " turn 700, when the RunModel task passes the Worker's 4 MiB gRPC message limit",
    )
    parser.add_argument("--json", type=Path, default=None)
    arguments = parser.parse_args()
    results: dict[str, list[dict[str, Any]]] = {}
    with LocalEngine(database=":memory:", port=0) as engine:
        policy = CompactionPolicy(context_window_tokens=arguments.context_window)
        with_compaction = await run_session(
            engine, turns=arguments.turns, compaction=policy, label="Compaction"
        )
        print_table(
            f"with compaction (context window {arguments.context_window} tokens)",
            with_compaction,
        )
        results["with_compaction"] = [asdict(point) for point in with_compaction]
        if not arguments.skip_without_compaction:
            without = await run_session(
                engine, turns=arguments.plain_turns, compaction=None, label="Plain"
            )
            print_table("without compaction", without)
            results["without_compaction"] = [asdict(point) for point in without]
    if arguments.json is not None:
        arguments.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
