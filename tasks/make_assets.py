"""Draw the raster assets of the example tasks: `python3 tasks/make_assets.py` from the checkout.

The pictures are abstract shapes drawn with Pillow so the tasks own every byte they ship; the
vector icons and logos are hand-written SVG files kept next to them. Text never goes into an
image here: every readable word of a reference page is live DOM text.
"""

from __future__ import annotations

import math
import random
from pathlib import Path

from PIL import Image, ImageDraw, ImageFilter

__all__ = ["main"]

HERE = Path(__file__).resolve().parent


def _gradient(size: tuple[int, int], top: tuple[int, int, int], bottom: tuple[int, int, int]):
    width, height = size
    image = Image.new("RGB", size)
    draw = ImageDraw.Draw(image)
    for y in range(height):
        t = y / max(1, height - 1)
        colour = tuple(round(a + (b - a) * t) for a, b in zip(top, bottom, strict=True))
        draw.line([(0, y), (width, y)], fill=colour)
    return image


def hero_illustration(path: Path) -> None:
    image = _gradient((520, 400), (224, 231, 255), (199, 210, 254))
    draw = ImageDraw.Draw(image)
    draw.rounded_rectangle([60, 70, 460, 330], radius=18, fill=(255, 255, 255))
    draw.rounded_rectangle([60, 70, 460, 110], radius=18, fill=(79, 70, 229))
    draw.rectangle([60, 95, 460, 110], fill=(79, 70, 229))
    for i, colour in enumerate([(248, 113, 113), (251, 191, 36), (52, 211, 153)]):
        draw.ellipse([78 + i * 22, 84, 92 + i * 22, 98], fill=colour)
    for i, height in enumerate([60, 110, 85, 150, 130, 180]):
        x = 100 + i * 55
        draw.rounded_rectangle([x, 300 - height, x + 34, 300], radius=6, fill=(129, 140, 248))
    draw.ellipse([380, 20, 500, 140], fill=(251, 191, 36))
    image.save(path, optimize=True)


def landscape(path: Path, size: tuple[int, int]) -> None:
    width, height = size
    image = _gradient(size, (254, 215, 170), (251, 146, 60))
    draw = ImageDraw.Draw(image)
    draw.ellipse(
        [width * 0.62, height * 0.18, width * 0.62 + 90, height * 0.18 + 90], fill=(255, 247, 237)
    )
    rng = random.Random(7)
    for layer, colour in enumerate([(120, 53, 15), (154, 52, 18), (67, 20, 7)]):
        base = height * (0.55 + layer * 0.14)
        points = [(0, height)]
        for x in range(0, width + 40, 40):
            points.append((x, base - 60 * math.sin(x / (130 + layer * 40)) - rng.uniform(0, 25)))
        points.append((width, height))
        draw.polygon(points, fill=colour)
    image.save(path, optimize=True)


def avatar(path: Path, colour: tuple[int, int, int]) -> None:
    image = Image.new("RGB", (96, 96), (226, 232, 240))
    draw = ImageDraw.Draw(image)
    draw.ellipse([30, 16, 66, 52], fill=colour)
    draw.ellipse([14, 58, 82, 124], fill=colour)
    image = image.filter(ImageFilter.SMOOTH)
    image.save(path, optimize=True)


def line_chart(path: Path) -> None:
    """A revenue line and area with light grid lines; the axis labels are DOM text on the page."""
    width, height = 640, 280
    image = Image.new("RGB", (width, height), (255, 255, 255))
    draw = ImageDraw.Draw(image)
    for i in range(5):
        y = 20 + i * 60
        draw.line([(0, y), (width, y)], fill=(226, 232, 240), width=1)
    values = [32, 41, 38, 52, 49, 61, 58, 70, 66, 79, 84, 92]
    step = width / (len(values) - 1)
    points = [(i * step, 260 - v * 2.4) for i, v in enumerate(values)]
    draw.polygon([(0, 260), *points, (width, 260)], fill=(219, 234, 254))
    draw.line(points, fill=(37, 99, 235), width=3, joint="curve")
    for x, y in points:
        draw.ellipse([x - 4, y - 4, x + 4, y + 4], fill=(37, 99, 235))
    image.save(path, optimize=True)


def main() -> None:
    hero_illustration(HERE / "landing-page" / "assets" / "hero.png")
    landscape(HERE / "article" / "assets" / "cover.png", (800, 340))
    avatar(HERE / "article" / "assets" / "author.png", (234, 88, 12))
    avatar(HERE / "settings-page" / "assets" / "avatar.png", (13, 148, 136))
    line_chart(HERE / "dashboard-chart" / "assets" / "revenue.png")


if __name__ == "__main__":
    main()
