"""Helpers of the report tests: run a bundled sample job in a tmp dir, and check the
structure of the report it writes (Markdown and HTML)."""

from __future__ import annotations

import base64
import io
import re
from pathlib import Path

from job_helpers import REPO

PNG = b"\x89PNG\r\n\x1a\n"
FIRST_SCREEN = ("- **What", "- **For whom:**", "- **Accuracy", "- **Cost", "- **Budget left:**")
JARGON = ("seed 00", "adpm", "hpf-", "eps_effective", "eps_tree", "weight solver",
          "weight per row", "ε charged (total)", "N_int")
IMAGE = re.compile(r"!\[[^\]]*\]\(([^)]+)\)")
HTML_IMAGE = re.compile(r'<img src="([^"]+)" alt="[^"]*" data-file="([^"]+)">')


def sample_job(root: Path, name: str, engine: str = "pandas") -> Path:
    """The bundled job ``jobs/<name>.toml`` with its data and schemas linked and its outputs
    and ledger under ``root`` (the repository's out/ is not touched)."""
    (root / "jobs").mkdir(parents=True, exist_ok=True)
    for sub in ("data", "schemas"):
        if not (root / sub).exists():
            (root / sub).symlink_to(REPO / sub)
    text = (REPO / "jobs" / f"{name}.toml").read_text()
    assert 'engine = "pandas"' in text
    path = root / "jobs" / f"{name}.toml"
    path.write_text(text.replace('engine = "pandas"', f'engine = "{engine}"'))
    return path


def sections(text: str) -> dict[str, str]:
    """The report's level-2 sections, heading -> body."""
    parts = re.split(r"^(## .*)$", text, flags=re.MULTILINE)
    return {parts[i]: parts[i + 1] for i in range(1, len(parts), 2)}


def tables(text: str) -> list[list[list[str]]]:
    """Every Markdown table of a text, as rows of cells (header first, rule dropped)."""
    out: list[list[list[str]]] = []
    current: list[list[str]] = []
    for line in [*text.splitlines(), ""]:
        if line.startswith("|"):
            if not re.match(r"^\|[-|:\s]+$", line):
                current.append([c.strip() for c in line.strip().strip("|").split("|")])
        elif current:
            out.append(current)
            current = []
    return out


def decodable_png(data: bytes) -> tuple[int, int]:
    """Decode a PNG fully; returns its (height, width)."""
    import matplotlib.image as mpimg

    assert data.startswith(PNG)
    pixels = mpimg.imread(io.BytesIO(data), format="png")
    assert pixels.shape[0] > 50
    assert pixels.shape[1] > 50
    return int(pixels.shape[0]), int(pixels.shape[1])


def check_report(out: Path, release_ids: list[str], *, levels: bool = True) -> dict[str, str]:
    """Assert the report's structure; return its level-2 sections.

    Sections: one per release in job order, each opening with its first screen (what, for
    whom, accuracy, cost, budget left) followed by values, details, then the budgets and
    the glossary last. No two ε levels print the same in a levels table; every plot file is
    referenced and every reference is a decodable PNG; the HTML embeds every image as a
    data URI whose bytes are the plot's, and links only to anchors of its own page.
    """
    text = (out / "report.md").read_text()
    parts = sections(text)
    heads = list(parts)
    assert heads == [*(f"## Release `{r}`" for r in release_ids),
                     "## Budget left after this run", "## Glossary"], heads
    for rid in release_ids:
        body = parts[f"## Release `{rid}`"]
        bullets = [ln for ln in body.splitlines() if ln.startswith("- **")]
        starts = [next(i for i, b in enumerate(bullets) if b.startswith(s)) for s in FIRST_SCREEN]
        assert starts == sorted(starts), (rid, bullets)
        # the first screen comes before any table or plot of the release
        first_table = body.find("\n|")
        assert body.find("- **Budget left:**") < first_table, rid
        assert "### Values" in body, rid
        assert "### Details" in body, rid
    # the glossary lists exactly the terms the report uses (by each term's own words)
    from hdp_spark.report.words import _GLOSSARY

    glossary = parts["## Glossary"]
    body = text.split("## Glossary", 1)[0].lower()
    for term, _words, triggers in _GLOSSARY:
        used = any(t.lower() in body for t in triggers)
        assert (f"- **{term}**:" in glossary) == used, (term, used)
    assert "ε (epsilon)" in glossary
    for jargon in JARGON:
        assert jargon not in text, jargon
    # ε levels: never two that print the same
    level_tables = [t for t in tables(text) if t[0][0] == "ε allowed"]
    assert bool(level_tables) == levels
    for t in level_tables:
        labels = [row[0] for row in t[1:]]
        assert len(labels) == len(set(labels)), labels
        assert len(labels) <= 8
    # plots: every file referenced, every reference present and decodable
    refs = IMAGE.findall(text)
    assert len(refs) == len(set(refs))
    files = sorted(p.relative_to(out).as_posix() for p in (out / "plots").glob("*.png"))
    assert sorted(refs) == files
    for rel in refs:
        decodable_png((out / rel).read_bytes())
    # HTML: self-contained, every image embedded and equal to its plot file
    html = (out / "report.html").read_text()
    embedded = HTML_IMAGE.findall(html)
    assert [f for _, f in embedded] == refs
    assert html.count("<img") == len(refs)
    for src, rel in embedded:
        prefix = "data:image/png;base64,"
        assert src.startswith(prefix)
        data = base64.b64decode(src[len(prefix):], validate=True)
        assert data == (out / rel).read_bytes()
        decodable_png(data)
    assert not re.search(r'(src|href)="(?!data:|#)', html)
    for anchor in re.findall(r'href="#([^"]+)"', html):
        assert f'id="{anchor}"' in html, anchor
    for rid in release_ids:
        assert f'<h2 id="release-{rid}">' in html, rid
    assert html.count('<section class="release">') == len(release_ids)
    return parts
