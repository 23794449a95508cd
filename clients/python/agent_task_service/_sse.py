"""An incremental parser of server-sent events (the text/event-stream format of the HTML standard)."""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass
from typing import Iterator, List, Optional

# A line ends with CRLF, LF or CR; a CR at the end of the buffer may be the first half of a CRLF.
_EOL = re.compile(r"\r\n|\n|\r(?=[^\n])")


@dataclass
class ServerSentEvent:
    """One dispatched event: its `id:`, `event:` and joined `data:` lines."""

    id: Optional[str]
    event: str
    data: str


class SSEDecoder:
    """Feed it bytes as they arrive; it yields each event once its blank line has arrived.

    A connection that breaks mid-event leaves the partial event undispatched, so a resumed
    stream (Last-Event-ID) neither loses nor repeats an event.
    """

    def __init__(self) -> None:
        self._text = codecs.getincrementaldecoder("utf-8")()
        self._buf = ""
        self._data: List[str] = []
        self._event = ""
        self._id: Optional[str] = None
        self.last_event_id: Optional[str] = None

    def feed(self, chunk: bytes) -> Iterator[ServerSentEvent]:
        """Takes the next bytes of the stream; yields the events they complete."""
        self._buf += self._text.decode(chunk)
        while True:
            match = _EOL.search(self._buf)
            if match is None:
                return
            line, self._buf = self._buf[: match.start()], self._buf[match.end() :]
            event = self._line(line)
            if event is not None:
                yield event

    def _line(self, line: str) -> Optional[ServerSentEvent]:
        if line == "":
            return self._dispatch()
        if line.startswith(":"):
            return None  # a comment: the server's keep-alive
        name, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id" and "\0" not in value:
            self._id = value
        return None

    def _dispatch(self) -> Optional[ServerSentEvent]:
        if self._id is not None:
            self.last_event_id = self._id
        data, event, eid = self._data, self._event, self._id
        self._data, self._event, self._id = [], "", None
        if not data:
            return None
        return ServerSentEvent(id=eid if eid is not None else self.last_event_id, event=event or "message", data="\n".join(data))
