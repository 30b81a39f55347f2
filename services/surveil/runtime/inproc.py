"""The in-process bus: the topics in memory, for the embedded mode (demo, offline replay, tests).

Events are delivered in the order published, so each table's events keep their order, as on a
Kafka partition keyed by table. Processors run exactly as on the Kafka runner.
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Callable, Iterable

from ..events import codec
from ..events.deadletter import DeadLetter, dead_letter
from ..events.models import Event
from .processor import Processor, Rejected
from .state import Backend, MemoryBackend, State


class InProcessBus:
    def __init__(self, backend: Backend | None = None) -> None:
        self.backend = backend or MemoryBackend()
        self._subscribers: dict[str, list[tuple[Processor, State]]] = defaultdict(list)
        self._states: list[State] = []
        self._queue: deque[Event] = deque()
        self.dead_letters: list[DeadLetter] = []
        self._taps: list[Callable[[Event], None]] = []

    def attach(self, processor: Processor) -> State:
        state = State(self.backend, processor.name)
        self._states.append(state)
        for topic in processor.consumes:
            self._subscribers[topic].append((processor, state))
        return state

    def tap(self, observer: Callable[[Event], None]) -> None:
        """Call ``observer`` with every event as it is delivered (a recorder, a live view)."""
        self._taps.append(observer)

    def publish(self, events: Event | Iterable[Event]) -> None:
        if isinstance(events, Event):
            self._queue.append(events)
        else:
            self._queue.extend(events)

    def run(self) -> int:
        """Deliver everything published, and everything that produces, until the bus is quiet."""
        delivered = 0
        queue = self._queue
        while queue:
            event = queue.popleft()
            delivered += 1
            for observer in self._taps:
                observer(event)
            for processor, state in self._subscribers[event.topic]:
                try:
                    queue.extend(processor.process(event, state))
                except Rejected as rejection:
                    self.dead_letters.append(
                        dead_letter(
                            processor.name, codec.encode(event), rejection.reason, origin=event.topic, topic=event.topic, key=event.subject
                        )
                    )
        for state in self._states:
            state.commit()
        return delivered
