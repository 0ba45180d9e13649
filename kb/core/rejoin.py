"""Lines of a hard-wrapped copy, joined back into the lines the program printed.

Two cases, told apart by the capture profile (kb.core.capture.Profile):

* outer (`wrap_width`): a terminal cut the captured lines at a fixed width; the pieces
  after a cut carry no prefix. A piece of exactly the width goes on in the next line.
* inner (`inner_wrap_width`): the program's own lines were cut (rich in a container, a
  wrapped paste re-captured) and the capture then prefixed every piece; the piece after
  a cut carries the same capture layers, in the same stream.
* word (`word_wrap_width`): as inner, but the program wrapped at word boundaries: a piece
  goes on the line before when its first word would not have fit there (capture.word_wrapped);
  the space the wrap took is put back.

A held piece is not continued by a line that starts a record of its own: an engine
header, the next record of the same writer (`same_head`), or, after a whole traceback
frame line, that frame's indented code. Each joined line keeps the number of its first
piece and how many pieces it was made of, so line numbers and contiguity stay those of
the log."""

from __future__ import annotations

from dataclasses import dataclass

from kb.core.capture import Peeled, Profile, continues, cuts_a_word, peel, same_head, shown, word_wrapped
from kb.core.patterns import FRAME, starts_record
from kb.core.split import parse_line


# A line does not end with an opening bracket: a piece that does was cut inside a record
# (`... [` | `2025-12-03 10:21:09,118 E ...]`), whatever the next piece looks like.
_OPENERS = ("[", "(", "{")


@dataclass(slots=True)
class Joined:
    first: int  # number of the first piece
    last: int  # number of the last piece
    line: str | Peeled  # the whole line (Peeled: its capture already taken off)


class Rejoiner:
    def __init__(self, profile: Profile) -> None:
        self.profile = profile
        self._text = ""  # outer: the pieces held so far
        self._peeled: Peeled | None = None  # inner: the pieces held so far, peeled
        self._first = 0
        self._piece = ""  # word: the last piece held, as the console printed it
        self._last = 0  # word: the number of the held line's last physical line

    def feed(self, number: int, text: str) -> list[Joined]:
        """The whole lines that line `number` completes (none while it is held)."""
        words = self.profile.word_wrap_width
        if self.profile.wrap_width:
            whole = self._outer(number, text, self.profile.wrap_width)
            # ... and, inside, records a console wrapped at words before the capture
            return [out for line in whole for out in self._word(line, words)] if words else whole
        if words:
            return self._word(Joined(number, number, text), words)
        return self._inner(number, text, self.profile.inner_wrap_width or 0)

    def flush(self, number: int) -> list[Joined]:
        """What is still held at the end of the log (`number`: its last line)."""
        out = []
        if self._text:
            out.append(Joined(self._first, number, self._text))
            self._text = ""
            if self.profile.word_wrap_width:
                out = self._word(out[0], self.profile.word_wrap_width)
        if self._peeled is not None:
            out.append(Joined(self._first, number, self._peeled))
            self._peeled = None
        return out

    def _outer(self, number: int, text: str, width: int) -> list[Joined]:
        out = []
        if self._text and self._ends_record(self._text, text, peel(text, self.profile).text):
            out.append(Joined(self._first, number - 1, self._text))  # the cut line ended with its record
            self._text = ""
        piece = text.rstrip("\r")
        if continues(piece, width):
            if not self._text:
                self._first = number
            self._text += piece
            return out
        if self._text:
            out.append(Joined(self._first, number, self._text + text))
            self._text = ""
        else:
            out.append(Joined(number, number, text))
        return out

    def _inner(self, number: int, text: str, width: int) -> list[Joined]:
        out = []
        peeled = peel(text, self.profile)
        cut = continues(peeled.text.rstrip("\r"), width)
        first = number
        held, self._peeled = self._peeled, None
        if held is not None:
            if peeled.stream == held.stream and not self._ends_record(held.text, peeled.text, peeled.text):
                held.text += peeled.text
                peeled, first = held, self._first
            else:
                out.append(Joined(self._first, number - 1, held))
        if cut:
            peeled.text = peeled.text.rstrip("\r")
            self._peeled, self._first = peeled, first
            return out
        out.append(Joined(first, number, peeled))
        return out

    def _word(self, line: Joined, width: int) -> list[Joined]:
        """Every line is held until the next one says whether it goes on it."""
        out = []
        peeled = line.line if isinstance(line.line, Peeled) else peel(line.line, self.profile)
        piece = peeled.text.rstrip("\r")
        first = line.first
        held, self._peeled = self._peeled, None
        if held is not None:
            if (peeled.stream == held.stream and peeled.layers == held.layers and not starts_record(peeled.text)
                    and not same_head(self._piece, piece) and word_wrapped(self._piece, piece, width)):
                held.text = f"{held.text.rstrip()} {piece.strip()}" if len(self._piece.rstrip()) < width \
                    else held.text + piece.strip()  # a word longer than the width, cut inside
                peeled, first = held, self._first
            else:
                out.append(Joined(self._first, self._last, held))
        self._piece, self._last = piece, line.last
        self._peeled, self._first = peeled, first
        return out

    def _ends_record(self, held: str, text: str, body: str) -> bool:
        """Does the held piece end with its record, the line `text` (`body`: peeled)
        starting one of its own? Not after an opening bracket; yes before an engine header
        (one that says more than a word's rest where the cut split a word), the same
        writer's next record, or a whole frame line's code."""
        return not held.endswith(_OPENERS) and (
            starts_record(body, specific=cuts_a_word(held, text)) or same_head(held, text)
            or self._code_after_frame(held, text))

    def _code_after_frame(self, held: str, text: str) -> bool:
        """An indented line after a held piece that is a whole traceback frame line is
        that frame's code: the frame line merely filled the width. A frame line padded
        with spaces (a console's padded copy) goes on: Python ends its frame lines with
        the function's name."""
        if not shown(text).startswith("  ") or shown(held).endswith("  "):
            return False
        frame = FRAME.match(parse_line(0, shown(held), self.profile).body)
        return frame is not None and frame["func"] is not None
