"""The render stage (rule `render_answer`, verbs `render`, `render-reference`).

Reads `answer/answer.html` (or a task's `reference.html`); loads it in Debian's Chromium with the
network closed and writes `render/render.png`, `render_full.png`, `dom.json` and `render.json`."""
