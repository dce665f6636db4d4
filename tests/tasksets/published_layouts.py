"""Small source folders in each published layout, written by the tests (the real sets are not
downloaded here). Each holds an ordinary page, and one page each that loads a remote resource,
shows no text, and fails to render, so every kind of refusal is met (the plain folder also has a
page that grows with its viewport, which no height can show whole).
"""

from __future__ import annotations

from pathlib import Path

from PIL import Image

__all__ = [
    "D2C_SCREENSHOT",
    "D2C_REMOTE_URL",
    "BEACON_URL",
    "write_design2code",
    "write_html_folder",
    "write_interaction2code",
]

D2C_SCREENSHOT = (640, 400)
D2C_REMOTE_URL = "https://fonts.example.org/css?family=Inter"
BEACON_URL = "http://beacon.example.org/hit"

_STYLE = "body{margin:0;font:16px sans-serif;background:#fff}h1{margin:0;padding:16px}"


def _page(title: str, body: str, head: str = "") -> str:
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{title}</title>"
        f"<style>{_STYLE}</style>{head}</head><body>{body}</body></html>\n"
    )


def _png(path: Path, size: tuple[int, int], colour: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", size, colour).save(path)


def write_design2code(folder: Path) -> Path:
    """The Design2Code test set's layout: `N.html` with its screenshot `N.png`, and the
    placeholder image every page loads, side by side in one folder."""
    folder.mkdir(parents=True)
    Image.new("RGB", (120, 80), "#b0b0b0").save(folder / "rick.jpg")
    pages = {
        "1": _page(
            "Harbour tours",
            "<h1>Harbour tours</h1><p>Daily boats at nine and noon.</p>"
            "<img src='rick.jpg' width='120' height='80' alt=''>",
        ),
        "2": _page(
            "Remote font",
            "<h1>Remote font</h1><p>This page loads its font from the network.</p>",
            head=f"<link rel='stylesheet' href='{D2C_REMOTE_URL}'>",
        ),
        "3": _page(
            "",
            "<div style='width:300px;height:200px;background:#2a6'></div>"
            "<img src='rick.jpg' width='120' height='80' alt=''>",
        ),
        "4": _page(
            "Broken script",
            "<h1>Broken script</h1><script>throw new Error('fixture page fails');</script>",
        ),
        "5": _page(
            "Long menu",
            "<h1>Long menu</h1>" + "".join(f"<p>Dish number {i}</p>" for i in range(30)),
        ),
        # A page whose screenshot was not obtained with it.
        "6": _page("No screenshot", "<h1>No screenshot</h1>"),
    }
    for stem, html in pages.items():
        (folder / f"{stem}.html").write_text(html)
        if stem != "6":
            _png(folder / f"{stem}.png", D2C_SCREENSHOT, "#eeeeee")
    return folder


def write_html_folder(folder: Path) -> Path:
    """A plain folder of HTML pages with their local files in subfolders."""
    folder.mkdir(parents=True)
    _png(folder / "img" / "logo.png", (64, 32), "#c33")
    _png(folder / "img" / "bg.png", (8, 8), "#eef")
    (folder / "css").mkdir()
    (folder / "css" / "site.css").write_text("main{background:url(../img/bg.png)}\n")
    pages = {
        "about.html": _page(
            "About us",
            "<main><h1>About us</h1><p>We repair bicycles.</p>"
            "<img src='img/logo.png' alt='logo'></main>",
            head="<link rel='stylesheet' href='css/site.css'>",
        ),
        "Contact Us.html": _page("Contact", "<h1>Contact</h1><p>Write to the shop.</p>"),
        # Its remote request is made by a script: only the render can see it.
        "beacon.html": _page(
            "Beacon",
            f"<h1>Beacon</h1><script>fetch('{BEACON_URL}').catch(() => {{}});</script>",
        ),
        "blank.html": _page("Blank", "<div style='height:300px;background:#345'></div>"),
        # Always one viewport and a line taller than its viewport, whatever that is.
        "grows.html": _page(
            "Grows", "<div style='min-height:100vh;background:#ddd'></div><p>Footer line</p>"
        ),
        "broken.html": _page(
            "Console",
            "<h1>Console</h1><script>console.error('fixture console failure');</script>",
        ),
    }
    # Refused before any render: a file that is not there, and one outside the folder.
    _png(folder.parent / "elsewhere.png", (8, 8), "#000")
    pages["missing.html"] = _page("Missing", "<h1>Missing</h1><img src='img/nowhere.png'>")
    pages["outside.html"] = _page("Outside", "<h1>Outside</h1><img src='../elsewhere.png'>")
    for name, html in pages.items():
        (folder / name).write_text(html)
    return folder


def write_interaction2code(folder: Path) -> Path:
    """Interaction2Code's layout: per page a folder with the page, its screenshots, and per
    interaction an `action.json` with the screenshots before and after it."""
    page = folder / "1"
    page.mkdir(parents=True)
    (page / "1.html").write_text(
        _page("Tabs", "<h1>Tabs</h1><button id='b'>Open</button><div id='p' hidden>Panel</div>")
    )
    _png(page / "1.png", (640, 400), "#fff")
    action = page / "action_1"
    action.mkdir()
    (action / "action.json").write_text('{"type": "click", "selector": "#b"}\n')
    _png(action / "before.png", (640, 400), "#fff")
    _png(action / "after.png", (640, 400), "#fef")
    return folder
