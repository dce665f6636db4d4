"""Generated screenshots for the offline model's tests (text tesseract can read back)."""

from __future__ import annotations

import base64
import io

from PIL import Image, ImageDraw, ImageFont

TITLE = "Harbour Weather Report"
BODY = "Winds are calm along the coast"
TITLE_COLOUR = "#1f3a93"
BODY_COLOUR = "#aa2222"
BACKGROUND = "#f4f1ea"
PANEL = (40, 200, 300, 330)
PANEL_COLOUR = "#27ae60"


def screenshot(*, body: bool = True, body_colour: str = BODY_COLOUR) -> Image.Image:
    """A 640x360 page: a title, optionally a body line, and a coloured panel."""
    image = Image.new("RGB", (640, 360), BACKGROUND)
    draw = ImageDraw.Draw(image)
    draw.text((40, 30), TITLE, font=ImageFont.load_default(size=30), fill=TITLE_COLOUR)
    if body:
        draw.text((40, 100), BODY, font=ImageFont.load_default(size=20), fill=body_colour)
    draw.rectangle(PANEL, fill=PANEL_COLOUR)
    return image


def data_url(image: Image.Image) -> str:
    buffer = io.BytesIO()
    image.save(buffer, "PNG")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def channel_distance(first: str, second: str) -> int:
    a = [int(first[i : i + 2], 16) for i in (1, 3, 5)]
    b = [int(second[i : i + 2], 16) for i in (1, 3, 5)]
    return max(abs(x - y) for x, y in zip(a, b, strict=True))
