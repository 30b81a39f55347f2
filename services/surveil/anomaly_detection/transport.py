"""faust's Kafka transport, with offset commits that never step over a message the detectors have
not processed, and streams resuming where the tables' state, not the committed offsets, says.

Three faust behaviours lost events across a restart of the worker, or made it re-read everything:

- Commits. The streams the detectors read are written in Kafka transactions (table-controller,
  settlement), and each transaction leaves a marker at an offset no consumer is ever given. faust
  acks such holes ("gaps") when its fetcher finds them, counting the next message's own offset in
  (faust-streaming/faust#606, robinhood/faust#625: the committed offset crept one transaction a
  commit interval, and a restarted worker re-read everything), and it commits past one unacked
  offset after the last commit, taking it for a marker. A message still waiting in the stream's
  queue was stepped over that way; a worker killed then never read it (a round's opening, and with
  it every bet of the round). Here a hole is what the broker did not return between two returned
  messages, acked once the stream has processed the message after it, and a commit goes up to the
  first offset that is neither processed nor in a hole, and no further.
- Resuming. After an assignment faust resumes the input partitions, seeks them to the committed
  offsets, then clears the streams' queues; what the fetcher queued in between was cleared and
  never read again (its read offset had passed it): a card read lost, a switched card alerted.
  The input partitions now resume only once the queues are cleared (``resume_flow``).
- Committing ahead of the tables. faust's flush before a commit gives up after 0.1 s without a
  send; a worker killed then resumed from changelog state older than its committed offsets. The
  commit now first awaits the app's ``before_commit`` (the detectors write the values their events
  changed, and wait for the broker's acknowledgement). As a safety net, once the tables are
  recovered each input partition is read again from the offset after the last one its tables
  applied (the state names it, ``Outbox.applied``), where that is below the committed offset.

Fetches gather while records keep coming (``App.fetch_gather_ms``): after a fetch that brought
records, the next to the same broker waits there up to that long for more; after one that came
back empty, the next is answered at the first record, as faust's always are. At a table's pace a
fetch answered at once brings a few records, and each fetch costs the worker (its consumer
thread, the hand-over to the streams) and the broker the same however few it brings; an idle
worker still fetches once every 1.5 s (faust's wait), and the first record after a pause is not
held.

The producer (``Producer``) has its client track every topic it sends to: aiokafka dropped a
topic it knew but did not track from its metadata, and a batch waiting for that topic then never
went out, nor did the commit waiting for it return.

Commits are the timer's alone (``COMMIT_INTERVAL_MS``). faust's fetcher also commits each time
10,000 more messages have been acked (``broker_commit_every``), and hands the streams nothing until
that commit, or the timer's under way, is done: every 8 s at 3,000 tables, the events held for as
long as a commit takes.

A commit is bounded (``App.commit_timeout``): nothing else bounds its waits but faust's 20-minute
producer request timeout, and a worker whose commit hangs reads on with nothing committed. Past
the bound the worker crashes, as faust does when a send fails, to be restarted from its last
commit; a slow commit is logged, and every commit's time is measured
(``surveil_detection_commit_seconds``). A commit that waits on a consumer whose Kafka client has
lost its metadata task stops the worker at once: every lookup of the group coordinator awaits
that task's next update, so the commit would wait for good. (After a broker's kill -9 the
consumer's task, aiokafka's ``_md_synchronizer``, ended on uvloop's RuntimeError for a write to
a closed connection, which it does not catch, and a commit waited 300 s.) That write now raises
aiokafka's own connection error (``_closed_connections_refuse_writes``), which the task catches.

The worker (``Worker``) has no terminal spinner: faust's, run at WARNING or above, set the root
logger to DEBUG, and every library's debug line became a record no handler wrote.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterable, Mapping, Set
from pathlib import Path
from typing import Any

import faust
from aiokafka.conn import AIOKafkaConnection, CloseReason
from aiokafka.errors import KafkaConnectionError
from faust.transport.consumer import ensure_TPset
from faust.transport.drivers import aiokafka
from faust.types import TP
from faust.utils.functional import consecutive_numbers

from ..runtime import header_keys
from ..runtime.kafka import GATHER_MIN_BYTES
from . import metrics

header_keys.install()  # every record readable, whatever its header keys


def _closed_connections_refuse_writes() -> None:
    """aiokafka's connections raise ``KafkaConnectionError`` on a request to a transport already
    closed, as on a write that fails. uvloop's transports raise a RuntimeError there, which aiokafka
    does not catch (aio-libs/aiokafka#1038): the task that met it ended, and when that was the
    consumer's metadata task no commit returned again. A reset connection closes its transport
    before the connection's read task sees it, so a request can come in between."""
    send = AIOKafkaConnection.send

    def refusing_send(self: AIOKafkaConnection, request: Any, expect_response: bool = True) -> Any:
        writer = self._writer
        if writer is not None and writer.transport.is_closing():
            self.close(reason=CloseReason.CONNECTION_BROKEN)
            raise KafkaConnectionError(f"Connection at {self.host}:{self.port} closed")
        return send(self, request, expect_response)

    AIOKafkaConnection.send = refusing_send


_closed_connections_refuse_writes()

SLOW_COMMIT_S = 2.0  # a commit takes tens of milliseconds; one this slow is worth a line in the log


class CommitStalled(Exception):
    """A commit waited past ``App.commit_timeout``, or on a Kafka consumer that cannot recover."""


def gather_fetches(fetcher: Any, gather_ms: int) -> None:
    """Have aiokafka's ``fetcher`` gather at each broker while records keep coming: a fetch to a
    broker whose last answer brought records waits there up to ``gather_ms`` for more (or until
    ``GATHER_MIN_BYTES`` of backlog fills it); one to a broker whose last answer brought none is
    answered at its first record (the fetcher's own settings). Per broker, as the runners'
    (``runtime/kafka.py``): a cluster's idle broker does not take a busy one's gathering away."""
    if not gather_ms:
        return
    fetch = fetcher._proc_fetch_request  # what it sends each fetch request through, one a broker at a time
    brought: dict[int, bool] = {}  # per broker: whether its last answer brought records

    async def gathering(assignment: Any, node_id: int, request: Any) -> bool:
        if brought.get(node_id):
            request._min_bytes, request._max_wait_ms = GATHER_MIN_BYTES, gather_ms  # read when the request is sent
        got: bool = await fetch(assignment, node_id, request)  # true when a partition got records (or an error)
        brought[node_id] = got
        return got

    fetcher._proc_fetch_request = gathering


class ConsumerThread(aiokafka.AIOKafkaConsumerThread):
    async def on_start(self) -> None:
        await super().on_start()
        gather_fetches(self._consumer._fetcher, self.app.fetch_gather_ms)  # type: ignore[union-attr, attr-defined]


class Consumer(aiokafka.Consumer):
    """Commits up to the first offset that is neither a processed message nor in a hole (a
    marker, an aborted record: offsets the broker never returns)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._held_back: set[TP] = set()
        self._held: dict[TP, int] = {}  # the offset a partition's commits wait for, once warned of
        self._last_returned: dict[TP, int | None] = {}
        # Per partition: the hole before a returned message, by the message's offset.
        self._hole_before: defaultdict[TP, dict[int, range]] = defaultdict(dict)
        self._commit_waits_for = ""  # what the commit in progress waits for (faust makes one at a time)

    def _new_consumer_thread(self) -> ConsumerThread:
        return ConsumerThread(self, loop=self.loop, beacon=self.beacon)

    def resume_partitions(self, tps: Iterable[TP]) -> None:
        # The input partitions wait for resume_flow. faust resumes them, seeks them to the
        # committed offsets, then clears the streams' queues: what was fetched in between was
        # queued, cleared, and never read again (the fetcher's read offset had passed it).
        tps = ensure_TPset(tps)
        inputs = {tp for tp in tps if self.app.topics.acks_enabled_for(tp.topic)}
        self._held_back |= inputs
        super().resume_partitions(tps - inputs)

    def resume_flow(self) -> None:
        super().resume_flow()
        held, self._held_back = self._held_back, set()
        super().resume_partitions(held & self.assignment())  # not those a rebalance took meanwhile

    async def _getmany(self, active_partitions: set[TP] | None, timeout: float) -> Mapping[TP, Any]:
        records = await super()._getmany(active_partitions, timeout)
        for tp, returned in records.items():
            self._returned(tp, [record.offset for record in returned])
        return records

    def _returned(self, tp: TP, offsets: list[int]) -> None:
        """The offsets the broker returned, in order. Found here, not as faust hands messages on:
        faust drops some it was given (a partition paused meanwhile) and reads them again later."""
        last = self._last_returned.get(tp)
        holes = self._hole_before[tp]
        for offset in offsets:
            if last is not None and offset > last + 1:
                holes[offset] = range(last + 1, offset)
            last = offset
        self._last_returned[tp] = last

    async def _add_gap(self, tp: TP, offset_from: int, offset_to: int) -> None:
        pass  # holes are found in _returned: faust's start one after a sought offset, a marker or not

    def _new_offset(self, tp: TP) -> int | None:
        acked = self._acked[tp]
        self._ack_holes(tp)
        if not acked:
            return None
        acked[:] = sorted(set(acked))  # a message read twice (around a seek) is acked twice
        committed = self._committed_offset[tp]
        if committed is not None and acked[0] != committed:  # a message is missing: not past it
            if self._held.get(tp) != committed:
                self._held[tp] = committed
                self.log.warning("%s: offset %d is not processed while later ones are: commits wait for it", tp, committed)
            return None
        run = next(consecutive_numbers(acked))
        del acked[: len(run)]
        self._acked_index[tp].difference_update(run)
        return run[-1] + 1

    def _ack_holes(self, tp: TP) -> None:
        """The hole before each message the stream processed (acked: faust's stream acks in its
        Cython iterator, past ``Consumer.ack``) is acked too; from the committed offset on."""
        holes = self._hole_before[tp]
        committed = self._committed_offset[tp]
        processed = self._acked_index[tp]
        for offset in [o for o in holes if o in processed or (committed is not None and o < committed)]:
            hole = holes.pop(offset)
            if offset in processed:
                self._acked[tp].extend(hole if committed is None else range(max(hole.start, committed), hole.stop))

    async def _commit_offsets(self, offsets: Mapping[TP, int], start_new_transaction: bool = True) -> bool:
        # Every value the committed events changed, acknowledged by the broker first: faust's
        # flush before a commit gives up on its buffer after 0.1 s without a send, and a worker
        # killed then resumed from tables older than its committed offsets.
        loop = asyncio.get_running_loop()
        started = loop.time()
        self._commit_waits_for = "the tables' changelog"
        bound = asyncio.timeout(self.app.commit_timeout)  # type: ignore[attr-defined]
        watchdog = asyncio.ensure_future(self._watch_commit(asyncio.current_task(), started, bound))
        try:
            async with bound:
                await self.app.before_commit(self.assignment(), dict(self._committed_offset))  # type: ignore[attr-defined]
                written = loop.time()
                self._commit_waits_for = "the offsets' commit"
                committed = await super()._commit_offsets(offsets, start_new_transaction)
        except TimeoutError:
            await self.crash(
                CommitStalled(
                    f"a commit waited {loop.time() - started:.1f} s for {self._commit_waits_for}: stopping the worker, "
                    "to be restarted from its last commit"
                )
            )
            return False
        finally:
            watchdog.cancel()
        took = loop.time() - started
        metrics.COMMIT_SECONDS.observe(took)
        if took > SLOW_COMMIT_S:
            self.log.warning(
                "a commit of %d partitions took %.1f s: %.1f s for the tables' changelog, %.1f s for the offsets",
                len(offsets),
                took,
                written - started,
                took - (written - started),
            )
        return committed

    async def _watch_commit(self, commit: asyncio.Task[Any] | None, started: float, bound: asyncio.Timeout) -> None:
        """While a commit waits, says every so often what for and where: the chain of awaits of
        the commit and of the Kafka clients' tasks (the producer's here, the consumer's in its
        thread). A commit that never returns has left nothing else to go on (docs/faults.md). One
        that waits on a consumer whose metadata task has ended is past its bound at once."""
        loop = asyncio.get_running_loop()
        delay = SLOW_COMMIT_S
        while True:
            await asyncio.sleep(delay)
            delay = min(2 * delay, 60.0)
            lost = None
            try:  # another thread's tasks, read while they run: a line, or none, never a failure
                thread_loop = getattr(getattr(self, "_thread", None), "thread_loop", None)
                tasks = [*asyncio.all_tasks(loop), *(asyncio.all_tasks(thread_loop) if thread_loop else ())]
                clients = [chain for chain in map(_await_chain, tasks) if "aiokafka/" in chain]
                consumer = self._thread._ensure_consumer()
                lost = _ended(consumer._client._sync_task)
                metadata = (
                    f"the consumer's group coordinator {consumer._coordinator.coordinator_id}, "
                    f"{_metadata_state(consumer._client)}; the producer's {_metadata_state(self.app.producer._producer.client)}"  # type: ignore[attr-defined]
                )
            except Exception as error:  # noqa: BLE001
                clients, metadata = [f"unreadable: {error!r}"], ""
            self.log.warning(
                "a commit has waited %.0f s for %s; the commit: %s; %s; the Kafka clients' tasks: %s",
                loop.time() - started,
                self._commit_waits_for,
                _await_chain(commit),
                metadata,
                " | ".join(sorted(clients)),
            )
            if lost:
                self._commit_waits_for += f" (the Kafka consumer's metadata task {lost}: it would never find its group coordinator again)"
                bound.reschedule(loop.time())
                return

    async def perform_seek(self) -> None:
        await super().perform_seek()  # to the committed offsets
        unapplied = self.app.unapplied_offsets(self.assignment())  # type: ignore[attr-defined]
        for tp, offset in unapplied.items():
            committed = self._read_offset.get(tp)
            if committed is not None and offset < committed:
                self.log.warning("%s: the tables applied up to %d, not to %d as committed: reading again from there", tp, offset, committed)
                await self.seek(tp, offset)
                self._read_offset[tp] = offset
        self._sought()

    def _sought(self) -> None:
        """The broker returns messages from the read offsets now (None: from where it says)."""
        self._last_returned = {tp: None if offset is None else offset - 1 for tp, offset in self._read_offset.items()}
        self._hole_before.clear()


def _metadata_state(client: Any) -> str:
    """An aiokafka client's metadata task and the update it was asked for: every coordinator
    lookup awaits that update."""
    task, asked = client._sync_task, client._md_update_fut
    state = "not started" if task is None else _ended(task) or "running"
    update = "none asked" if asked is None else "one asked, pending" if not asked.done() else "one asked, done"
    return f"metadata task {state}, {update}, its wake {'set' if client._md_update_waiter.done() else 'not set'}"


def _ended(task: asyncio.Task[Any] | None) -> str | None:
    """How a task ended (``None``: it has not)."""
    if task is None or not task.done():
        return None
    return "ended: cancelled" if task.cancelled() else f"ended: {task.exception()!r}"


def _await_chain(task: asyncio.Task[Any] | None) -> str:
    """Where a task waits: the coroutines it awaits through, outermost first, by file and line."""
    links, awaited = [], task.get_coro() if task else None
    while awaited is not None:
        frame = getattr(awaited, "cr_frame", None) or getattr(awaited, "gi_frame", None)
        if frame is None:  # a future, or an awaitable of C code
            links.append(type(awaited).__name__)
            break
        links.append(f"{'/'.join(Path(frame.f_code.co_filename).parts[-3:])}:{frame.f_lineno} {frame.f_code.co_name}")
        awaited = getattr(awaited, "cr_await", None) or getattr(awaited, "gi_yieldfrom", None)
    return " > ".join(links)


class Producer(aiokafka.Producer):
    """Has its client track the metadata of every topic it sends to.

    aiokafka's client refreshes the metadata of the topics it tracks, and of every topic while it
    tracks none; a send to a topic it already knows does not track it. faust refreshes after each
    topic it declares, while the client tracks none: every topic becomes known, untracked. The
    first send to a topic created after that (the pattern charts' changelog, on a fresh broker)
    tracked that topic alone, the next refresh dropped the others, and a batch already waiting for
    one of them (a table's value, sent in the same commit) looked for a leader no refresh would
    bring back, for the 20 minutes of the request timeout: the worker's commits stopped
    (docs/faults.md)."""

    async def send(self, topic: str, *args: Any, **kwargs: Any) -> Any:
        self._ensure_producer().client.add_topic(topic)  # tracked already: a set lookup
        return await super().send(topic, *args, **kwargs)


class Transport(aiokafka.Transport):
    Consumer = Consumer
    Producer = Producer


async def _nothing_before_commit(assigned: Set[TP], committed: Mapping[TP, int | None]) -> None:
    pass


class Worker(faust.Worker):
    """faust's worker without its terminal spinner, which at a log level of WARNING or above set the
    root logger to DEBUG, to spin at every line: every library's debug line was then made into a
    record (aiokafka's for every request and fetch), for no one to read."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.spinner = None


# More acks than a worker makes: the fetcher never commits (the module's docstring).
FETCHER_NEVER_COMMITS = 2**63 - 1


class App(faust.App):
    #: Awaited before each offset commit, with the assignment and the offsets faust last committed
    #: (or tried to: it flushed its producer first either way) or read from the broker: what must
    #: be durable first.
    before_commit: Callable[[Set[TP], Mapping[TP, int | None]], Awaitable[None]] = staticmethod(_nothing_before_commit)
    #: Per assigned partition, the offset after the last one the recovered tables applied (if known).
    unapplied_offsets: Callable[[Set[TP]], Mapping[TP, int]] = staticmethod(lambda assigned: {})
    #: Seconds a commit may wait, for ``before_commit`` and the broker, before the worker crashes.
    #: Longer than a broker's restart (100 s seen after a kill -9 on a busy two-core machine): a
    #: commit waiting this long is a wedged client, not a broker away.
    commit_timeout: float = 300.0
    #: Milliseconds a fetch waits at the broker for more records after one that brought some (0:
    #: each answered at its first record).
    fetch_gather_ms: int = 0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, Worker=Worker, broker_commit_every=FETCHER_NEVER_COMMITS, **kwargs)

    def _new_transport(self) -> Any:
        return Transport(self.conf.broker_consumer, self)
