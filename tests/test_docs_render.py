"""The site as a reader sees it (issue 38): the main pages built, then rendered by headless
Chromium at 1280 pixels, which reports from the laid-out page what the strict build and the
Markdown lint cannot see: a code block wider than the content column (a reader scrolls
sideways), or a list that came out as a run-on paragraph. Skipped, saying so, where no
Chromium is installed."""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BROWSER = next(
    (
        found
        for name in ("chromium", "chromium-browser", "google-chrome")
        if (found := shutil.which(name))
    ),
    None,
)
PAGES = [
    "index.html",
    "getting-started/index.html",
    "concepts/index.html",
    "tutorial/index.html",
    "guides/data-scientist/index.html",
    "reference/python/index.html",
    "architecture/index.html",
    "benchmarking/index.html",
]
# Run in the page once it is laid out: each code block (Mermaid's sources aside: Mermaid draws
# them, from a script this offline machine cannot fetch) whose text is wider than its box, by
# its widest line; each paragraph holding a line that starts like a list item.
PROBE = """<script>
window.addEventListener('load', () => setTimeout(() => {
  const widest = (text) => text.split('\\n').reduce((a, b) => (a.length >= b.length ? a : b));
  const wide = [...document.querySelectorAll('.md-content pre > code')]
    .filter((code) => !/^\\s*(flowchart|stateDiagram|graph)\\b/.test(code.textContent))
    .filter((code) => code.scrollWidth > code.clientWidth + 1)
    .map((code) => widest(code.textContent));
  const runOn = [...document.querySelectorAll('.md-content p')]
    .filter((p) => /\\n\\s*([-*]|\\d+\\.) /.test(p.textContent))
    .map((p) => p.textContent.slice(0, 100));
  const probe = document.createElement('pre');
  probe.id = 'render-probe';
  probe.textContent = JSON.stringify({wide, runOn});
  document.body.appendChild(probe);
}, 300));
</script>"""


def _readme_blocks() -> set[str]:
    """The README's code lines: a page that repeats a README block verbatim (Getting started's
    demo and quick start, which tests/test_readme.py then runs once) keeps its lines, as GitHub
    shows them, and wraps nothing the README does not."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return {
        line for block in re.findall(r"```\w*\n(.*?)```", text, re.S) for line in block.splitlines()
    }


@pytest.fixture(scope="module")
def rendered(tmp_path_factory, strict_site: Path) -> dict[str, dict]:
    if BROWSER is None:
        pytest.skip("no Chromium on this machine (chromium, chromium-browser, google-chrome)")
    site = tmp_path_factory.mktemp("rendered") / "site"
    shutil.copytree(strict_site, site)  # its pages get a probe: the built site stays as built
    found = {}
    for page in PAGES:
        path = site / page
        path.write_text(path.read_text(encoding="utf-8").replace("</body>", PROBE + "</body>"))
        dom = subprocess.run(
            [BROWSER, "--headless", "--no-sandbox", "--disable-gpu", "--window-size=1280,2000",
             "--virtual-time-budget=5000", "--dump-dom", path.as_uri()],
            capture_output=True, text=True, timeout=120,
        ).stdout  # fmt: skip
        probe = re.search(r'<pre id="render-probe">(.*?)</pre>', dom, re.S)
        assert probe is not None, f"{page}: the page did not finish rendering"
        found[page] = json.loads(html.unescape(probe.group(1)))
    return found


@pytest.mark.parametrize("page", PAGES)
def test_no_code_line_is_wider_than_the_page(rendered: dict[str, dict], page: str):
    wide = [line for line in rendered[page]["wide"] if line not in _readme_blocks()]
    assert wide == [], f"{page}: code lines a reader scrolls sideways to read: {wide}"


@pytest.mark.parametrize("page", PAGES)
def test_lists_render_as_lists(rendered: dict[str, dict], page: str):
    assert rendered[page]["runOn"] == [], f"{page}: a list run into its paragraph"
