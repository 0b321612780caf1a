"""Run-time shims that let the Dex SDK's own integration scenarios run against
dex-python-sdk 1.23.0 and the local engine.

The harness copies this file into a temporary export of the scenarios (never
into this repository's copy of them) and points the scenarios' environment
modules and a generated ``conftest.py`` at it. It provides:

* pull-mode replacements for the scenarios' test environments (the originals
  start a listening Worker; the local engine only dispatches to pull Workers);
* Client methods the scenarios call but 1.23.0 no longer offers
  (``publish``, ``get_attribute``, ``set_attribute``,
  ``wait_for_attribute_equal``), implemented on the public FlowService RPCs
  with the old call shapes and error behaviour.
"""

from __future__ import annotations

import asyncio
import os
import threading
import uuid
from datetime import timedelta
from tempfile import TemporaryDirectory
from types import TracebackType
from typing import Any, cast

import dex
import dex.flow as dex_flow
from dex import (
    AsyncClient,
    AsyncWorker,
    Attribute,
    AttributeMap,
    AttributeMatch,
    BlobCacheConfig,
    Channel,
    ChannelMap,
    Client,
    ClientOptions,
    Flow,
    PullWorkerOptions,
    Registry,
    RequestTimeoutError,
    WaitForAttributeOptions,
    WaitForStepCompletionOptions,
    Worker,
    WorkerOptions,
    open_blob_cache,
)
from dex.dexpb import dex_pb2 as pb
from dex.runtime_errors import ErrorSubStatus, LongPollTimeoutError

DEFAULT_SERVER_ADDRESS = "127.0.0.1:8801"
READY_TIMEOUT_SECONDS = 20.0
CACHE_BYTES = 64 * 1024 * 1024
# The scenarios were written for a listening Worker, which runs every task it is
# sent; a pull Worker's default cap (CPU count, one slot reserved for RPCs) would
# leave a 2-core machine one Step slot and serialize Steps the scenarios run in parallel.
PULL_TASK_SLOTS = 32


def _server_address() -> str:
    return os.environ.get("DEX_SERVER_ADDRESS", DEFAULT_SERVER_ADDRESS)


# --- pull-mode environments ------------------------------------------------


class DexDevTestEnvironment:
    """Synchronous scenario environment: a pull Worker in a thread plus a Client."""

    def __init__(self, *flows: Flow[Any]) -> None:
        server_address = _server_address()
        registry = Registry(flows)
        self._cache_directory = TemporaryDirectory(prefix="dex-local-integ-cache-")
        self._cache = open_blob_cache(BlobCacheConfig(self._cache_directory.name, CACHE_BYTES))
        self._worker = Worker(
            registry,
            self._cache,
            WorkerOptions(
                server_address=server_address,
                pull=PullWorkerOptions(max_concurrent_tasks=PULL_TASK_SLOTS),
            ),
        )
        self._failure: BaseException | None = None
        self._thread = threading.Thread(
            target=self._run_worker, name="dex-local-integ-worker", daemon=True
        )
        self._thread.start()
        try:
            self._worker.wait_pull_registered(timeout=READY_TIMEOUT_SECONDS)
        except BaseException:
            self._worker.close()
            self._thread.join(timeout=10)
            self._cache.close()
            self._cache_directory.cleanup()
            if self._failure is not None:
                raise RuntimeError("pull Worker failed to start") from self._failure
            raise
        self.client = Client(
            registry, self._cache, ClientOptions(server_address, self._worker.worker_target)
        )

    def __enter__(self) -> DexDevTestEnvironment:
        return self

    def __exit__(
        self,
        exception_type: type[BaseException] | None,
        exception: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.client.close()
        self._worker.close()
        self._thread.join(timeout=30)
        self._cache.close()
        self._cache_directory.cleanup()
        if self._thread.is_alive():
            raise RuntimeError("pull Worker did not stop")
        if self._failure is not None:
            raise RuntimeError("pull Worker failed") from self._failure

    def _run_worker(self) -> None:
        try:
            self._worker.start()
        except BaseException as error:  # reported from __exit__
            self._failure = error


class AsyncDexDevTestEnvironment:
    """Asynchronous scenario environment: a pull AsyncWorker task plus an AsyncClient."""

    def __init__(self, *flows: Flow[Any], allow_async_handlers: bool = False) -> None:
        self._server_address = _server_address()
        self._registry = Registry(flows, allow_async_handlers=allow_async_handlers)
        self._cache_directory = TemporaryDirectory(prefix="dex-local-integ-async-cache-")
        self._cache = open_blob_cache(BlobCacheConfig(self._cache_directory.name, CACHE_BYTES))
        self._worker = AsyncWorker(
            self._registry,
            self._cache,
            WorkerOptions(
                server_address=self._server_address,
                pull=PullWorkerOptions(max_concurrent_tasks=PULL_TASK_SLOTS),
            ),
        )
        self._worker_task: asyncio.Task[None] | None = None
        self._client: AsyncClient | None = None

    @property
    def client(self) -> AsyncClient:
        if self._client is None:
            raise RuntimeError("AsyncDexDevTestEnvironment is not entered")
        return self._client

    async def __aenter__(self) -> AsyncDexDevTestEnvironment:
        self._worker_task = asyncio.create_task(self._worker.start())
        try:
            await self._worker.wait_pull_registered(timeout=READY_TIMEOUT_SECONDS)
        except BaseException:
            await self._shutdown()
            raise
        self._client = AsyncClient(
            self._registry,
            self._cache,
            ClientOptions(self._server_address, self._worker.worker_target),
        )
        return self

    async def __aexit__(
        self,
        exception_type: type[BaseException] | None,
        exception: BaseException | None,
        traceback: object,
    ) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None
        await self._shutdown()

    async def _shutdown(self) -> None:
        await self._worker.close()
        if self._worker_task is not None:
            try:
                await asyncio.wait_for(self._worker_task, timeout=30)
            except (TimeoutError, asyncio.CancelledError):
                self._worker_task.cancel()
        self._cache.close()
        self._cache_directory.cleanup()


# --- Client methods the scenarios expect ------------------------------------
# They use the Client's own value mapper, name resolution and error translation
# (private helpers of the 1.23.0 SDK), so values and errors look exactly as the
# SDK's other calls produce them.

Definition = Attribute[Any] | AttributeMap[Any] | Channel[Any] | ChannelMap[Any]


def _split_instance(
    definition: Definition, args: tuple[object, ...]
) -> tuple[str | None, tuple[object, ...]]:
    if isinstance(definition, AttributeMap | ChannelMap):
        if not args or not isinstance(args[0], str):
            raise TypeError(f"{type(definition).__name__} calls need an instance name first")
        return args[0], args[1:]
    return None, args


def _publish_request(
    client: Any, flow_id: str, channel: Any, args: tuple[object, ...], run_id: str
) -> pb.PublishToChannelRequest:
    instance, values = _split_instance(channel, args)
    if not values:
        raise ValueError("publish requires at least one value")
    name = client._definition_name(channel, instance)
    codec = client._values.codec(channel.value_type)
    return pb.PublishToChannelRequest(
        flow_id=flow_id,
        run_id=run_id,
        messages=[
            pb.ChannelMessage(channel_name=name, value=client._values.encode(v, codec))
            for v in values
        ],
    )


def _get_request(
    client: Any, flow_id: str, attribute: Any, instance: str | None, run_id: str
) -> pb.GetAttributesRequest:
    return pb.GetAttributesRequest(
        flow_id=flow_id, run_id=run_id, keys=[client._definition_name(attribute, instance)]
    )


def _decode_get(client: Any, attribute: Any, response: pb.GetAttributesResponse) -> Any:
    if not response.attributes:
        return None
    return client._values.decode(
        response.attributes[0].value, client._values.codec(attribute.value_type)
    )


def _set_request(
    client: Any, flow_id: str, attribute: Any, args: tuple[object, ...], run_id: str
) -> pb.SetAttributesRequest:
    instance, rest = _split_instance(attribute, args)
    if len(rest) != 1:
        raise TypeError("set_attribute takes exactly one value")
    write = pb.AttributeWrite(
        key=client._definition_name(attribute, instance),
        value=client._values.encode(rest[0], client._values.codec(attribute.value_type)),
    )
    index = client._values.index_config(attribute.index, isinstance(attribute, AttributeMap))
    if index is not None:
        write.index_config.CopyFrom(index)
    return pb.SetAttributesRequest(
        flow_id=flow_id, run_id=run_id, attributes=[write], request_id=str(uuid.uuid4())
    )


def _equal_arguments(
    attribute: Any, args: tuple[object, ...], kwargs: dict[str, object]
) -> tuple[str | None, object, timedelta]:
    instance, rest = _split_instance(attribute, args)
    if "instance" in kwargs:
        instance = cast(str, kwargs.pop("instance"))
    values = list(rest)
    expected = kwargs.pop("expected") if "expected" in kwargs else values.pop(0)
    timeout = kwargs.pop("timeout") if "timeout" in kwargs else values.pop(0)
    if values or kwargs:
        raise TypeError("wait_for_attribute_equal received unexpected arguments")
    if not isinstance(timeout, timedelta):
        raise TypeError("wait_for_attribute_equal timeout must be a timedelta")
    return instance, expected, timeout


SCALAR_KINDS = frozenset({"string_value", "bool_value", "int_value", "double_value"})


def _require_scalar(client: Any, attribute: Any, expected: object) -> None:
    # The old call checked the encoded value itself and said so in its own words.
    encoded = client._values.encode(expected, client._values.codec(attribute.value_type))
    if encoded.WhichOneof("kind") not in SCALAR_KINDS:
        raise ValueError("wait_for_attribute_equal supports only string, boolean, or number values")


def _long_poll_timeout(error: RequestTimeoutError, flow_id: str) -> LongPollTimeoutError:
    # The old call had a server-side wait time and reported its expiry as a long-poll timeout.
    return LongPollTimeoutError(
        error.code,
        ErrorSubStatus.LONG_POLL_TIMEOUT,
        error.detail,
        "wait_for_attribute_equal",
        flow_id,
    )


def _sync_publish(
    self: Client, flow_id: str, channel: Any, /, *args: object, run_id: str = ""
) -> None:
    client = cast(Any, self)
    request = _publish_request(client, flow_id, channel, args, run_id)
    client._call(client._service.PublishToChannel, request, "publish", flow_id, "active")


def _sync_get_attribute(
    self: Client, flow_id: str, attribute: Any, instance: str | None = None, *, run_id: str = ""
) -> Any:
    client = cast(Any, self)
    response = client._call(
        client._service.GetAttributes,
        _get_request(client, flow_id, attribute, instance, run_id),
        "get_attribute",
        flow_id,
        "existing",
    )
    return _decode_get(client, attribute, response)


def _sync_set_attribute(
    self: Client, flow_id: str, attribute: Any, /, *args: object, run_id: str = ""
) -> None:
    client = cast(Any, self)
    request = _set_request(client, flow_id, attribute, args, run_id)
    client._call(client._service.SetAttributes, request, "set_attribute", flow_id, "active")


def _sync_wait_equal(
    self: Client, flow_id: str, attribute: Any, *args: object, **kwargs: object
) -> None:
    instance, expected, timeout = _equal_arguments(attribute, args, dict(kwargs))
    _require_scalar(self, attribute, expected)
    match: AttributeMatch[Any] = AttributeMatch[Any].equal_to(expected)
    options = WaitForAttributeOptions(request_timeout=timeout)
    try:
        if instance is None:
            self.wait_for_attribute_match(flow_id, attribute, match, options)
        else:
            self.wait_for_attribute_match(flow_id, attribute, instance, match, options)
    except RequestTimeoutError as error:
        raise _long_poll_timeout(error, flow_id) from error


async def _async_publish(
    self: AsyncClient, flow_id: str, channel: Any, /, *args: object, run_id: str = ""
) -> None:
    client = cast(Any, self)
    request = _publish_request(client, flow_id, channel, args, run_id)
    await client._call(client._service.PublishToChannel, request, "publish", flow_id, "active")


async def _async_get_attribute(
    self: AsyncClient,
    flow_id: str,
    attribute: Any,
    instance: str | None = None,
    *,
    run_id: str = "",
) -> Any:
    client = cast(Any, self)
    response = await client._call(
        client._service.GetAttributes,
        _get_request(client, flow_id, attribute, instance, run_id),
        "get_attribute",
        flow_id,
        "existing",
    )
    return _decode_get(client, attribute, response)


async def _async_set_attribute(
    self: AsyncClient, flow_id: str, attribute: Any, /, *args: object, run_id: str = ""
) -> None:
    client = cast(Any, self)
    request = _set_request(client, flow_id, attribute, args, run_id)
    await client._call(client._service.SetAttributes, request, "set_attribute", flow_id, "active")


async def _async_wait_equal(
    self: AsyncClient, flow_id: str, attribute: Any, *args: object, **kwargs: object
) -> None:
    instance, expected, timeout = _equal_arguments(attribute, args, dict(kwargs))
    _require_scalar(self, attribute, expected)
    match: AttributeMatch[Any] = AttributeMatch[Any].equal_to(expected)
    options = WaitForAttributeOptions(request_timeout=timeout)
    try:
        if instance is None:
            await self.wait_for_attribute_match(flow_id, attribute, match, options)
        else:
            await self.wait_for_attribute_match(flow_id, attribute, instance, match, options)
    except RequestTimeoutError as error:
        raise _long_poll_timeout(error, flow_id) from error


CLIENT_SHIMS: dict[str, tuple[object, object]] = {
    "publish": (_sync_publish, _async_publish),
    "get_attribute": (_sync_get_attribute, _async_get_attribute),
    "set_attribute": (_sync_set_attribute, _async_set_attribute),
    "wait_for_attribute_equal": (_sync_wait_equal, _async_wait_equal),
}


def _accept_step_instances() -> bool:
    """Old SDKs named Steps by instance (``go_to(self.second, ...)``); 1.23.0 by class.

    Every movement, failure route and cancellation selector resolves through
    ``_RegisteredFlow.step_class``, so mapping an instance to its class there
    covers them all.
    """
    registered_flow = cast(Any, dex_flow)._RegisteredFlow
    original = registered_flow.step_class
    if getattr(original, "_local_engine_shim", False):
        return False

    def step_class(self: Any, step: Any) -> Any:
        return original(self, step if isinstance(step, type) else type(step))

    step_class._local_engine_shim = True  # type: ignore[attr-defined]
    registered_flow.step_class = step_class
    return True


def _step_completion_options(argument: object) -> object:
    if isinstance(argument, timedelta):
        return WaitForStepCompletionOptions(request_timeout=argument)
    return argument


def _accept_step_completion_timeout() -> bool:
    """Old ``wait_for_step_completion`` took a timedelta where 1.23.0 takes options."""
    sync_original = Client.wait_for_step_completion
    if getattr(sync_original, "_local_engine_shim", False):
        return False
    async_original = AsyncClient.wait_for_step_completion

    def sync_wait(self: Client, flow_id: str, step_execution_id: Any, options: Any) -> None:
        sync_original(
            self, flow_id, step_execution_id, cast(Any, _step_completion_options(options))
        )

    async def async_wait(
        self: AsyncClient, flow_id: str, step_execution_id: Any, options: Any
    ) -> None:
        await async_original(
            self, flow_id, step_execution_id, cast(Any, _step_completion_options(options))
        )

    sync_wait._local_engine_shim = True  # type: ignore[attr-defined]
    Client.wait_for_step_completion = sync_wait
    AsyncClient.wait_for_step_completion = async_wait
    return True


NAME_ALIASES: dict[str, str] = {
    "go_to_multi": "go_to_many",
    "FlowNotActiveError": "FlowNotActiveOrNotFoundError",
}


def install() -> list[str]:
    """Add the missing Client methods and renamed exports; return what was added."""
    added: list[str] = []
    for name, (sync_impl, async_impl) in CLIENT_SHIMS.items():
        if not hasattr(Client, name):
            setattr(Client, name, sync_impl)
            added.append(f"Client.{name}")
        if not hasattr(AsyncClient, name):
            setattr(AsyncClient, name, async_impl)
            added.append(f"AsyncClient.{name}")
    for old, new in NAME_ALIASES.items():
        if not hasattr(dex, old):
            setattr(dex, old, getattr(dex, new))
            added.append(f"dex.{old} = dex.{new}")
    if _accept_step_instances():
        added.append("Step instances accepted wherever 1.23.0 expects a Step class")
    if _accept_step_completion_timeout():
        added.append("wait_for_step_completion accepts a timedelta as its request timeout")
    return added
