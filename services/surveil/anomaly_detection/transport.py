"""faust's Kafka transport, with its offset commits stepping over transaction markers, and its
streams resuming where the tables' state, not the committed offsets, says.

The streams the detectors read are written in Kafka transactions (table-controller,
settlement), and each transaction leaves a marker at an offset no consumer is ever given. faust
fills such holes in a partition's acked offsets ("gaps") with the offsets between two messages
it was given, but it counts the later message's own offset into the gap as well
(faust-streaming/faust#606, robinhood/faust#625). That offset is then acked twice, and faust's
search for the first run of consecutive acked offsets stops at every duplicate: the committed
offset crept forward one transaction a commit interval while the worker kept up with everything.
The lag the room watches grew without end, and a restarted worker re-read all of it. Here the
missing offsets are acked as they are found, and nothing else is.

A worker restarted after a broker restart was found resuming from changelog state older than
the offsets it had committed: faust's flush before a commit gives up after 0.1 s without a send.
The commit now first awaits the app's ``before_commit`` (the detectors write the values their
events changed, and wait for the broker's acknowledgement). As a safety net, once the tables are
recovered each input partition is read again from the offset after the last one its tables
applied (the state names it, ``Outbox.applied``), where that is below the committed offset.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Set
from typing import Any

import faust
from faust.transport.drivers import aiokafka
from faust.types import TP


class Consumer(aiokafka.Consumer):
    async def _add_gap(self, tp: TP, offset_from: int, offset_to: int) -> None:
        # Called with the first missing offset and the offset of the message after the hole. The
        # missing offsets are acked as they are: faust keeps them in an interval tree merged on
        # every gap, which cost the detectors a sixth of their time at a floor of 1,000 tables.
        committed = self._committed_offset[tp]
        if committed is not None:
            offset_from = max(offset_from, committed + 1)
        self._acked[tp].extend(range(offset_from, offset_to))

    def _new_offset(self, tp: TP) -> int | None:
        acked = self._acked[tp]
        if len(acked) != len(set(acked)):  # a duplicate from before a rebalance or a seek
            acked[:] = sorted(set(acked))
        return super()._new_offset(tp)

    async def _commit_offsets(self, offsets: Mapping[TP, int], start_new_transaction: bool = True) -> bool:
        # Every value the committed events changed, acknowledged by the broker first: faust's
        # flush before a commit gives up on its buffer after 0.1 s without a send, and a worker
        # killed then resumed from tables older than its committed offsets.
        await self.app.before_commit(self.assignment())  # type: ignore[attr-defined]
        return await super()._commit_offsets(offsets, start_new_transaction)

    async def perform_seek(self) -> None:
        await super().perform_seek()  # to the committed offsets
        unapplied = self.app.unapplied_offsets(self.assignment())  # type: ignore[attr-defined]
        for tp, offset in unapplied.items():
            committed = self._read_offset.get(tp)
            if committed is not None and offset < committed:
                self.log.warning("%s: the tables applied up to %d, not to %d as committed: reading again from there",
                                 tp, offset, committed)
                await self.seek(tp, offset)
                self._read_offset[tp] = offset


class Transport(aiokafka.Transport):
    Consumer = Consumer


async def _nothing_before_commit(assigned: Set[TP]) -> None:
    pass


class App(faust.App):
    #: Awaited with the assignment before each offset commit: what must be durable first.
    before_commit: Callable[[Set[TP]], Awaitable[None]] = staticmethod(_nothing_before_commit)
    #: Per assigned partition, the offset after the last one the recovered tables applied (if known).
    unapplied_offsets: Callable[[Set[TP]], Mapping[TP, int]] = staticmethod(lambda assigned: {})

    def _new_transport(self) -> Any:
        return Transport(self.conf.broker_consumer, self)
