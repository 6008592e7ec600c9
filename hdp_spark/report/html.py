"""The report as one self-contained HTML page: the Markdown the report writes, converted
(the small subset it uses: headings, paragraphs, lists, tables, block quotes, images and
inline code, bold, italics and links), with every image embedded as a ``data:`` URI so the
file opens offline and can be mailed as it is.
"""

from __future__ import annotations

import base64
import html
import re
from pathlib import Path

__all__ = ["markdown_to_html", "slug"]

_IMAGE = re.compile(r"^!\[([^\]]*)\]\(([^)]+)\)$")
_STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; max-width: 68rem;
       margin: 2rem auto; padding: 0 1rem; line-height: 1.45; color: #1d2733; }
h1 { border-bottom: 2px solid #1f6f8b; padding-bottom: .3rem; }
h2 { margin-top: 2.5rem; border-bottom: 1px solid #c9d3dd; padding-bottom: .2rem; }
table { border-collapse: collapse; margin: .6rem 0; font-size: .92rem; }
th, td { border: 1px solid #c9d3dd; padding: .25rem .6rem; text-align: left; }
th { background: #eef3f7; }
tr:nth-child(even) td { background: #f8fafb; }
code { background: #eef3f7; padding: 0 .2rem; border-radius: 3px; }
blockquote { border-left: 4px solid #c8553d; margin: 1rem 0; padding: .2rem 1rem;
             background: #fbeeea; }
img { max-width: 100%; display: block; margin: .6rem 0; }
li { margin: .2rem 0; }
"""


def slug(heading: str) -> str:
    """The anchor of a heading, as Markdown renderers make it (``Release `a_b``` ->
    ``release-a_b``)."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _inline(text: str) -> str:
    """Escape, then code spans, bold, italics and links (code spans are left alone, and
    may sit inside bold or a link: ``**Accuracy (`x`):**``)."""
    codes: list[str] = []

    def hold(m: re.Match[str]) -> str:
        codes.append(f"<code>{html.escape(m.group(1))}</code>")
        return f"\x00{len(codes) - 1}\x00"

    s = html.escape(re.sub(r"`([^`]*)`", hold, text), quote=False)
    s = re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", s)
    s = re.sub(r"(?<![\w*])\*(?!\s)(.+?)(?<!\s)\*(?![\w*])", r"<em>\1</em>", s)
    s = re.sub(r"(?<![\w])_(?!\s)(.+?)(?<!\s)_(?![\w])", r"<em>\1</em>", s)
    s = re.sub(r"\[([^\]]+)\]\(([^)\s]+)\)",
               lambda m: f'<a href="{html.escape(m.group(2))}">{m.group(1)}</a>', s)
    return re.sub("\x00(\\d+)\x00", lambda m: codes[int(m.group(1))], s)


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _image(alt: str, src: str, base: Path) -> str:
    data = (base / src).read_bytes()
    uri = "data:image/png;base64," + base64.b64encode(data).decode("ascii")
    return (f'<figure><img src="{uri}" alt="{html.escape(alt)}" '
            f'data-file="{html.escape(src)}"></figure>')


def markdown_to_html(text: str, *, base: Path, title: str) -> str:
    """The report's Markdown as a complete HTML document; images (paths relative to
    ``base``) are read and embedded.

    Privacy:
        A re-rendering of the Markdown report: it shows exactly what the report shows.
    """
    lines = text.splitlines()
    body: list[str] = []
    i = 0
    section_open = False
    while i < len(lines):
        line = lines[i]
        if not line.strip():
            i += 1
            continue
        heading = re.match(r"^(#{1,6}) (.*)$", line)
        if heading:
            depth, content = len(heading.group(1)), heading.group(2)
            if depth <= 2:
                if section_open:
                    body.append("</section>")
                cls = "release" if content.startswith("Release `") else "part"
                body.append(f'<section class="{cls}">')
                section_open = True
            body.append(f'<h{depth} id="{slug(content)}">{_inline(content)}</h{depth}>')
            i += 1
            continue
        image = _IMAGE.match(line.strip())
        if image:
            body.append(_image(image.group(1), image.group(2), base))
            i += 1
            continue
        if line.startswith("|"):
            rows = []
            while i < len(lines) and lines[i].startswith("|"):
                rows.append(lines[i])
                i += 1
            head = _cells(rows[0])
            rest = [r for r in rows[1:] if not re.match(r"^\|[-|:\s]+$", r)]
            body.append("<table><thead><tr>" + "".join(f"<th>{_inline(c)}</th>" for c in head)
                        + "</tr></thead><tbody>")
            body += ["<tr>" + "".join(f"<td>{_inline(c)}</td>" for c in _cells(r)) + "</tr>"
                     for r in rest]
            body.append("</tbody></table>")
            continue
        if line.startswith("- "):
            items: list[str] = []
            while i < len(lines) and (lines[i].startswith("- ") or lines[i].startswith("  ")):
                if lines[i].startswith("- "):
                    items.append(lines[i][2:])
                else:
                    items[-1] += " " + lines[i].strip()
                i += 1
            body.append("<ul>" + "".join(f"<li>{_inline(t)}</li>" for t in items) + "</ul>")
            continue
        if line.startswith("> "):
            quote = []
            while i < len(lines) and lines[i].startswith(">"):
                quote.append(lines[i].lstrip(">").strip())
                i += 1
            body.append(f"<blockquote><p>{_inline(' '.join(quote))}</p></blockquote>")
            continue
        para = []
        while (i < len(lines) and lines[i].strip()
               and not lines[i].startswith(("#", "|", "- ", "> "))
               and not _IMAGE.match(lines[i].strip())):
            para.append(lines[i].strip())
            i += 1
        body.append(f"<p>{_inline(' '.join(para))}</p>")
    if section_open:
        body.append("</section>")
    return (
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        f"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
        f"<title>{html.escape(title)}</title>\n<style>{_STYLE}</style>\n</head>\n<body>\n"
        + "\n".join(body) + "\n</body>\n</html>\n"
    )
