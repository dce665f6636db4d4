"""What the render stage records about a page: the in-page DOM walk.

`dom.json` (and a task's `reference_dom.json`) and `render.json` are the render stage's contract
with scoring; their models are in `runfolder/render.py`, the render stage (`browser.py`,
`command.py`) fills them.

Design notes
- The walk visits elements and text nodes in document order, so `texts` reads like the page.
  Each entry says where its words come from in `source`: `"text"` for a text node,
  `"input-value"` for the value a form control shows (a text-like `<input>`, a `<textarea>`, the
  chosen option of a drop-down `<select>`, the label of an `<input type=submit|button|reset>`),
  and `"placeholder"` for a placeholder an empty control shows. A password field contributes
  its placeholder only: its value is drawn as dots and is nobody's business.
- A control's box is where its words are drawn, not the whole control: the width is the measured
  advance of the value as drawn (spaces kept; a textarea's widest line), at most the content box
  since overflowing text is cut off on screen, placed by `text-align`. A single-line control
  centres one line vertically; a textarea's box is its content box's height. Colour, weight and
  size of a placeholder come from its `::placeholder` style. `text` itself is whitespace-collapsed
  like every other entry.
- Image sources are written relative to the rendered folder when they point inside it, so a
  reference's `reference_dom.json` does not depend on where the checkout lives. `data:` URLs are
  written as their media type plus a sha256 of the whole URL: small, yet two inline images differ.
- Text inside `<textarea>` is its initial value, already reported through the control, so the
  text-node pass skips it; option text of a closed drop-down has no box and is skipped anyway.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote, urlsplit

from veriharness._util.hashing import sha256_bytes

__all__ = [
    "DOM_SCRIPT",
    "inside",
    "tidy_src",
]

# Returns the dom.json body (image sources not yet rewritten) and which limits it reached; runs
# inside the page. `limits.height`: boxes starting at or below this page height are not listed;
# `limits.entries`: at most this many texts and as many images.
DOM_SCRIPT = r"""
(limits) => {
  const capped = {texts: false, images: false, height: false};
  const SKIP = new Set(['SCRIPT', 'STYLE', 'NOSCRIPT', 'TEMPLATE', 'HEAD', 'TITLE', 'TEXTAREA']);
  const VALUE_TYPES = new Set(['', 'text', 'search', 'email', 'tel', 'url', 'number']);
  const LABEL_TYPES = new Set(['submit', 'button', 'reset']);
  const sx = window.scrollX, sy = window.scrollY;
  const box = r => ({x: r.left + sx, y: r.top + sy, width: r.width, height: r.height});
  const shown = el => el.checkVisibility({opacityProperty: true, visibilityProperty: true});
  const paint = new OffscreenCanvas(1, 1).getContext('2d', {willReadFrequently: true});
  const colours = new Map();
  const rgb = css => {
    if (!colours.has(css)) {
      const m = css.match(/^rgba?\(\s*([\d.]+)[,\s]+([\d.]+)[,\s]+([\d.]+)/);
      if (m) {
        colours.set(css, [m[1], m[2], m[3]].map(v => Math.round(Number(v))));
      } else {
        paint.clearRect(0, 0, 1, 1);
        paint.fillStyle = css;
        paint.fillRect(0, 0, 1, 1);
        colours.set(css, Array.from(paint.getImageData(0, 0, 1, 1).data.slice(0, 3)));
      }
    }
    return colours.get(css);
  };
  const positioning = el => {
    for (let e = el; e; e = e.parentElement) {
      const p = getComputedStyle(e).position;
      if (p !== 'static') return p;
    }
    return 'static';
  };
  const measure = new OffscreenCanvas(1, 1).getContext('2d');
  const controlWords = el => {
    const tag = el.localName;
    if (tag === 'textarea') {
      return el.value ? [el.value, 'input-value'] : [el.placeholder, 'placeholder'];
    }
    if (tag === 'select') {
      if (el.multiple || el.size > 1) return [null, null];
      return [el.selectedOptions[0]?.text ?? null, 'input-value'];
    }
    if (tag !== 'input') return [null, null];
    const type = el.type.toLowerCase();
    if (LABEL_TYPES.has(type)) return [el.value, 'input-value'];
    if (type === 'password') return el.value ? [null, null] : [el.placeholder, 'placeholder'];
    if (!VALUE_TYPES.has(type)) return [null, null];
    return el.value ? [el.value, 'input-value'] : [el.placeholder, 'placeholder'];
  };
  const control = el => {
    const [raw, source] = controlWords(el);
    const text = (raw ?? '').replace(/\s+/g, ' ').trim();
    if (!text || !shown(el)) return null;
    const r = el.getBoundingClientRect();
    if (r.width <= 0 || r.height <= 0) return null;
    const cs = getComputedStyle(el);
    const look = source === 'placeholder' ? getComputedStyle(el, '::placeholder') : cs;
    const px = v => parseFloat(v) || 0;
    const left = r.left + px(cs.borderLeftWidth) + px(cs.paddingLeft);
    const top = r.top + px(cs.borderTopWidth) + px(cs.paddingTop);
    const innerW = Math.max(0, r.right - px(cs.borderRightWidth) - px(cs.paddingRight) - left);
    const innerH = Math.max(0, r.bottom - px(cs.borderBottomWidth) - px(cs.paddingBottom) - top);
    measure.font = look.font || cs.font;
    // Controls draw their value as typed (spaces kept, textarea lines broken at newlines).
    const widest = Math.max(...raw.split('\n').map(line => measure.measureText(line).width));
    const width = Math.min(widest, innerW);
    const align = cs.textAlign;
    const x = align === 'center' ? left + (innerW - width) / 2
      : (align === 'right' || align === 'end') ? left + innerW - width : left;
    const size = px(look.fontSize);
    const line = Math.min(innerH, px(look.lineHeight) || size * 1.2);
    const multi = el.localName === 'textarea';
    const y = multi ? top : top + (innerH - line) / 2;
    const pos = positioning(el);
    return {text, source, x: x + sx, y: y + sy, width, height: multi ? innerH : line,
            font_size_px: size, font_weight: parseInt(look.fontWeight, 10) || 400,
            color: rgb(look.color), positioning: pos,
            pinned: pos === 'absolute' || pos === 'fixed'};
  };
  const CONTROLS = new Set(['INPUT', 'TEXTAREA', 'SELECT']);
  const texts = [];
  const root = document.body || document.documentElement;
  const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT | NodeFilter.SHOW_ELEMENT);
  const range = document.createRange();
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    if (node.nodeType === Node.ELEMENT_NODE) {
      const entry = CONTROLS.has(node.tagName) ? control(node) : null;
      if (entry && entry.y >= limits.height) {
        capped.height = true;
      } else if (entry) {
        texts.push(entry);
      }
      if (texts.length >= limits.entries) { capped.texts = true; break; }
      continue;
    }
    const el = node.parentElement;
    if (!el || SKIP.has(el.tagName) || !shown(el)) continue;
    const text = node.textContent.replace(/\s+/g, ' ').trim();
    if (!text) continue;
    range.selectNodeContents(node);
    const r = range.getBoundingClientRect();
    if (r.width <= 0 || r.height <= 0) continue;
    if (r.top + sy >= limits.height) { capped.height = true; continue; }
    const cs = getComputedStyle(el);
    const pos = positioning(el);
    texts.push({text, source: 'text', ...box(r), font_size_px: parseFloat(cs.fontSize),
                font_weight: parseInt(cs.fontWeight, 10) || 400, color: rgb(cs.color),
                positioning: pos, pinned: pos === 'absolute' || pos === 'fixed'});
    if (texts.length >= limits.entries) { capped.texts = true; break; }
  }
  const images = [];
  for (const el of root.querySelectorAll('*')) {
    const r = el.getBoundingClientRect();
    if (r.width <= 0 || r.height <= 0) continue;
    if (r.top + sy >= limits.height) { capped.height = true; continue; }
    if (!shown(el)) continue;
    if (images.length >= limits.entries) { capped.images = true; break; }
    const tag = el.localName;
    const item = {...box(r), natural_width: null, natural_height: null};
    if (tag === 'img') {
      images.push({...item, kind: 'img', src: el.currentSrc || el.getAttribute('src') || null,
                   natural_width: el.naturalWidth, natural_height: el.naturalHeight});
    } else if (tag === 'svg' && !el.parentElement?.closest('svg')) {
      images.push({...item, kind: 'svg', src: null});
    } else if (tag === 'canvas') {
      images.push({...item, kind: 'canvas', src: null,
                   natural_width: el.width, natural_height: el.height});
    }
    const bg = getComputedStyle(el).backgroundImage;
    for (const m of bg.matchAll(/url\(\s*(?:"((?:[^"\\]|\\.)*)"|'([^']*)'|([^)]*))\s*\)/g)) {
      images.push({...item, kind: 'background', src: m[1] ?? m[2] ?? m[3].trim()});
    }
  }
  const de = document.documentElement;
  const page = {width: Math.max(de.scrollWidth, document.body?.scrollWidth || 0),
                height: Math.max(de.scrollHeight, document.body?.scrollHeight || 0)};
  return {page, texts, images, capped};
}
"""


def inside(url: str, root: Path) -> bool:
    """Whether `url` is a local file whose resolved path (symlinks followed) lies under `root`."""
    parts = urlsplit(url)
    if parts.scheme != "file" or parts.netloc not in ("", "localhost"):
        return False
    return Path(unquote(parts.path)).resolve().is_relative_to(root)


def tidy_src(src: str | None, root: Path) -> str | None:
    """An image source as dom.json records it (see the module notes)."""
    if src is None:
        return None
    if src.startswith("data:"):
        media = src[5:].split(",", 1)[0].split(";", 1)[0] or "text/plain"
        return f"data:{media};{sha256_bytes(src.encode())}"
    if inside(src, root):
        return Path(unquote(urlsplit(src).path)).resolve().relative_to(root).as_posix()
    return src
