"""faust's Kafka transport, with its offset commits stepping over transaction markers.

The streams the detectors read are written in Kafka transactions (table-controller,
settlement), and each transaction leaves a marker at an offset no consumer is ever given. faust
fills such holes in a partition's acked offsets ("gaps") with the offsets between two messages
it was given, but it counts the later message's own offset into the gap as well
(faust-streaming/faust#606, robinhood/faust#625). That offset is then acked twice, and faust's
search for the first run of consecutive acked offsets stops at every duplicate: the committed
offset crept forward one transaction a commit interval while the worker kept up with everything.
The lag the room watches grew without end, and a restarted worker re-read all of it.
"""

from __future__ import annotations

from typing import Any

import faust
from faust.transport.drivers import aiokafka
from faust.types import TP


class Consumer(aiokafka.Consumer):
    async def _add_gap(self, tp: TP, offset_from: int, offset_to: int) -> None:
        # Called with the first missing offset and the offset of the message after the hole.
        await super()._add_gap(tp, offset_from, offset_to - 1)

    def _new_offset(self, tp: TP) -> int | None:
        acked = self._acked[tp]
        if len(acked) != len(set(acked)):  # a duplicate from before a rebalance or a seek
            acked[:] = sorted(set(acked))
        return super()._new_offset(tp)


class Transport(aiokafka.Transport):
    Consumer = Consumer


class App(faust.App):
    def _new_transport(self) -> Any:
        return Transport(self.conf.broker_consumer, self)
