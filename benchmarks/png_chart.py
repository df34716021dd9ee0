"""A line chart written as a PNG with the standard library alone (zlib, struct): the growth plot.

One chart does not justify matplotlib and its numpy, Pillow, fontTools and kiwisolver in the dev
lock: this draws what the plot needs, panels of points joined by lines over linear axes, a dashed
line for linear growth from the first point, and labels in a 3x5 pixel font, and writes an RGB PNG
(RFC 2083: signature, IHDR, one IDAT of zlib-compressed scanlines with filter 0, IEND).
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass
from pathlib import Path

Color = tuple[int, int, int]
WHITE, BLACK, GREY, BLUE, ORANGE = (255, 255, 255), (0, 0, 0), (200, 200, 200), (31, 119, 180), (255, 127, 14)
_FONT = {  # 3x5 glyphs, one row of 3 bits per line
    "0": "111101101101111", "1": "010110010010111", "2": "111001111100111", "3": "111001111001111",
    "4": "101101111001001", "5": "111100111001111", "6": "111100111101111", "7": "111001001001001",
    "8": "111101111101111", "9": "111101111001111", ".": "000000000000010", " ": "000000000000000",
    ",": "000000000010100", "x": "000101010101000", "(": "001010010010001", ")": "100010010010100",
    "-": "000000111000000", "/": "001001010100100",
    "A": "010101111101101", "B": "110101110101110", "C": "111100100100111", "D": "110101101101110",
    "E": "111100110100111", "F": "111100110100100", "G": "111100101101111", "I": "111010010010111",
    "K": "101101110101101", "L": "100100100100111", "M": "101111111101101", "N": "110101101101101",
    "O": "111101101101111", "P": "111101111100100", "R": "110101110101101", "S": "111100111001111",
    "T": "111010010010010", "U": "101101101101111", "W": "101101111111101", "Y": "101101010010010",
}  # fmt: skip


class Canvas:
    """An RGB image in memory."""

    def __init__(self, width: int, height: int) -> None:
        self.width, self.height = width, height
        self.pixels = bytearray(WHITE * (width * height))

    def dot(self, x: int, y: int, color: Color, radius: int = 0) -> None:
        for dy in range(-radius, radius + 1):
            for dx in range(-radius, radius + 1):
                px, py = x + dx, y + dy
                if 0 <= px < self.width and 0 <= py < self.height:
                    offset = 3 * (py * self.width + px)
                    self.pixels[offset : offset + 3] = bytes(color)

    def line(self, start: tuple[int, int], end: tuple[int, int], color: Color, *, dash: int = 0) -> None:
        (x0, y0), (x1, y1) = start, end
        steps = max(abs(x1 - x0), abs(y1 - y0), 1)
        for step in range(steps + 1):
            if dash and (step // dash) % 2:
                continue
            self.dot(round(x0 + (x1 - x0) * step / steps), round(y0 + (y1 - y0) * step / steps), color)

    def text(self, x: int, y: int, text: str, color: Color = BLACK, scale: int = 2) -> None:
        for index, char in enumerate(text.upper()):
            glyph = _FONT.get(char, _FONT[" "])
            for bit, on in enumerate(glyph):
                if on == "1":
                    for dy in range(scale):
                        for dx in range(scale):
                            self.dot(x + (index * 4 + bit % 3) * scale + dx, y + (bit // 3) * scale + dy, color)

    def png(self) -> bytes:
        rows = b"".join(
            b"\x00" + bytes(self.pixels[3 * y * self.width : 3 * (y + 1) * self.width]) for y in range(self.height)
        )
        header = struct.pack(">IIBBBBB", self.width, self.height, 8, 2, 0, 0, 0)
        return (
            b"\x89PNG\r\n\x1a\n"
            + _chunk(b"IHDR", header)
            + _chunk(b"IDAT", zlib.compress(rows, 9))
            + _chunk(b"IEND", b"")
        )


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


@dataclass(frozen=True)
class Panel:
    """One panel: y over x, both from 0; `unit` labels the y axis."""

    title: str
    unit: str
    points: list[tuple[float, float]]
    color: Color


def chart(panels: list[Panel], x_label: str, path: Path, *, size: tuple[int, int] = (420, 320)) -> None:
    """Panels side by side, each with the points joined, linear growth from the first point dashed grey."""
    width, height = size
    canvas = Canvas(width * len(panels), height)
    for index, panel in enumerate(panels):
        _panel(canvas, panel, x_label, index * width, width, height)
    path.write_bytes(canvas.png())


def _panel(canvas: Canvas, panel: Panel, x_label: str, left: int, width: int, height: int) -> None:
    x0, y0, x1, y1 = left + 70, height - 50, left + width - 20, 40
    x_max = max(x for x, _ in panel.points) or 1.0
    y_max = max(max(y for _, y in panel.points), _linear(panel.points, x_max)) * 1.1 or 1.0

    def at(x: float, y: float) -> tuple[int, int]:
        return round(x0 + (x1 - x0) * x / x_max), round(y0 - (y0 - y1) * y / y_max)

    canvas.text(left + 70, 12, f"{panel.title} ({panel.unit})")
    for fraction in (0.0, 0.25, 0.5, 0.75, 1.0):
        y = y_max * fraction
        canvas.line(at(0, y), at(x_max, y), GREY)
        canvas.text(left + 6, at(0, y)[1] - 5, f"{y:.0f}")
    for x, _ in panel.points:
        canvas.line(at(x, 0), (at(x, 0)[0], y0 + 4), BLACK)
        canvas.text(at(x, 0)[0] - 8, y0 + 10, f"{x / 1000:g}K")
    canvas.line((x0, y0), (x1, y0), BLACK)
    canvas.line((x0, y0), (x0, y1), BLACK)
    canvas.text(x1 - 60, y0 + 30, x_label)
    first = panel.points[0]
    canvas.line(at(*first), at(x_max, _linear(panel.points, x_max)), GREY, dash=4)
    for start, end in zip(panel.points, panel.points[1:], strict=False):
        canvas.line(at(*start), at(*end), panel.color)
    for point in panel.points:
        canvas.dot(*at(*point), panel.color, radius=3)


def _linear(points: list[tuple[float, float]], x: float) -> float:
    """The value at `x` if it grew in proportion from the first point."""
    x_first, y_first = points[0]
    return y_first * x / x_first if x_first else y_first
