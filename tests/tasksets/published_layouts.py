"""Small source folders in each published layout, written by the tests (the real sets are not
downloaded here; the Interaction2Code layout follows WebPAI/Interaction2Code's sample/ at commit
3e55b39). Each holds an ordinary page, and one page each that loads a remote resource,
shows no text, and fails to render, so every kind of refusal is met (the plain folder also has a
page that grows with its viewport, which no height can show whole).
"""

from __future__ import annotations

import json
from pathlib import Path

from PIL import Image

__all__ = [
    "D2C_SCREENSHOT",
    "D2C_REMOTE_URL",
    "BEACON_URL",
    "I2C_REMOTE_URL",
    "I2C_SCREENSHOT",
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


def _i2c_page(
    folder: Path, html: dict[str, str], actions: dict[str, dict[str, object]], states: int
) -> None:
    """One page folder as published (action.json, the states' screenshots with marked copies,
    each interaction's crop), with the saved page(s) the importer needs beside them."""
    folder.mkdir(parents=True)
    for name, text in html.items():
        (folder / name).write_text(text)
    for state in range(states):
        _png(folder / f"{state}.png", I2C_SCREENSHOT, "#ffffff" if state % 2 == 0 else "#eeeeff")
        _png(folder / f"{state}_mark.png", I2C_SCREENSHOT, "#ffeeee")
    for key in actions:
        _png(folder / f"interaction_{key}.png", (80, 40), "#ddd")
    top = {"link": f"https://pages.example.org/{folder.name}", "topic": "fixture"}
    (folder / "action.json").write_text(json.dumps(top | {"framework": "none"} | actions))


def _i2c_action(src: int, action: str, description: str, **extra: object) -> dict[str, object]:
    return {
        "src": str(src),
        "dst": str(src + 1),
        "action": action,
        "description": description,
        "tag type": ["button"],
        "visual type": ["color"],
    } | extra


I2C_SCREENSHOT = (640, 400)
I2C_REMOTE_URL = "https://cdn.example.org/site.css"


def write_interaction2code(folder: Path) -> Path:
    """Interaction2Code's layout: a folder per page with its action.json and screenshots, plus
    the saved page. Page 1: a click and a hover that work, a named element the page does not
    have, a drag, a click that changes nothing. Page 2: typing into a field found by its
    placeholder, a name two buttons share, a trigger given by an explicit selector, an explicit
    selector that matches nothing, a select switched from one option to another, and a click
    that starts from the state the select leads to (chained, so skipped). Page 3
    loads a remote stylesheet; page 4 is as published (no HTML); page 5's only interaction
    changes nothing, so it has none to import."""
    folder.mkdir(parents=True)
    style = "<link rel='stylesheet' href='site.css'>"
    _i2c_page(
        folder / "1",
        {
            "index.html": _page(
                "Studio",
                "<nav><a id='pricing' href='#'>Pricing</a></nav><h1>Studio</h1>"
                "<button onclick=\"document.body.classList.toggle('dark')\">Dark mode</button>"
                "<button>Static</button><p>Design for small teams.</p>",
                head=style,
            ),
        },
        {
            "1": _i2c_action(0, 'click the "Dark mode" button', "the page turns dark"),
            "2": _i2c_action(2, 'hover the mouse over the "Pricing" item', "Pricing lights up"),
            "3": _i2c_action(4, 'click on the "Newsletter" button', "a sign-up form opens"),
            "4": _i2c_action(6, "Drag the progress bar", "the bar moves"),
            "5": _i2c_action(8, 'click to the "Static" button', "nothing visible"),
        },
        10,
    )
    (folder / "1" / "site.css").write_text(
        ".dark{background:#222;color:#eee}#pricing{padding:4px}#pricing:hover{background:#fc0}\n"
    )
    _i2c_page(
        folder / "2",
        {
            "page.html": _page(
                "Search",
                "<h1>Search</h1><input placeholder='Search' style='font-size:20px'>"
                "<button id='go' onclick=\"document.getElementById('out').textContent="
                "'Results for hello'\">&#128269;</button><p id='out'></p>"
                "<button>More</button><button>More</button>"
                "<select onchange=\"document.getElementById('out').textContent="
                "'Language: ' + this.value\"><option value='py'>Python</option>"
                "<option value='php'>PHP</option></select>",
            ),
        },
        {
            "1": _i2c_action(0, 'type "hello" into the "Search" box', "the text appears"),
            "2": _i2c_action(2, 'click the "More" button', "more results"),
            "3": _i2c_action(4, "click the magnifier icon", "results show", selector="#go"),
            "4": _i2c_action(6, "click the filter", "filters show", selector="#filters"),
            "5": _i2c_action(8, 'switch "Python" option to "PHP" option', "PHP is chosen"),
            # Starts where 5 ended; on the page as loaded it would replay, and mean another thing.
            "6": _i2c_action(9, "click the magnifier icon again", "results", selector="#go"),
        },
        11,
    )
    _i2c_page(
        folder / "3",
        {
            "index.html": _page(
                "Remote",
                "<h1>Remote</h1><button>Go</button>",
                head=f"<link rel='stylesheet' href='{I2C_REMOTE_URL}'>",
            ),  # fmt: skip
        },
        {"1": _i2c_action(0, 'click the "Go" button', "it goes")},
        2,
    )
    _i2c_page(folder / "4", {}, {"1": _i2c_action(0, 'click the "Menu" button', "opens")}, 2)
    _i2c_page(
        folder / "5",
        {"index.html": _page("Still", "<h1>Still</h1><button>Idle</button>")},
        {"1": _i2c_action(0, 'click the "Idle" button', "nothing happens")},
        2,
    )
    return folder
