"""The graph shown in docs/reference/cli.md is the real output for that example,
and docs/assets/graph-example.svg is that same mermaid text, rendered.

* The ```text block of the `chainlang graph` section is exactly what
  `chainlang graph examples/morning-routine.chain.yaml` prints today.
* The page shows docs/assets/graph-example.svg, and that SVG was rendered from
  that very text: its root element carries `data-source-sha256`, the sha256 of
  the text (UTF-8), written when it was rendered. It is a standalone SVG that
  any viewer displays without JavaScript: no <foreignObject> (the labels are
  SVG <text>), no <script>.

When the graph output changes, test_cli_docs_show_the_real_graph shows how
the docs block must read, and test_rendered_graph_is_of_the_current_output
that the SVG is stale. To render it again (needs node, npm and chromium;
nothing of it is installed by the project):

    apt-get install chromium                      # or any Chrome/Chromium; set CHROMIUM=path
    mkdir SCRATCH && (cd SCRATCH && npm install mermaid puppeteer-core)
    python tests/test_docs_graph.py SCRATCH       # rewrites docs/assets/graph-example.svg

puppeteer-core downloads no browser: it drives the system one. The script
writes RENDER_JS (below) into SCRATCH and runs it with node: it loads
mermaid.min.js into a blank headless page, renders the text with
`htmlLabels: false` (labels as plain SVG text, not HTML in <foreignObject>),
and serializes the <svg> as XML. Mermaid's SVG-text labels drop a bare `<` or
`>` (its HTML labels keep them), so before rendering the script writes them in
the quoted labels as mermaid's entity codes `#lt;` / `#gt;`, which mermaid
shows as the same characters; the sha256 is of the text exactly as printed.
Then look at the picture (e.g. `rsvg-convert -b white -o graph.png
docs/assets/graph-example.svg`, outside the repository) and read the diff.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PAGE = REPO / "docs" / "reference" / "cli.md"
SVG = REPO / "docs" / "assets" / "graph-example.svg"
EXAMPLE = "examples/morning-routine.chain.yaml"
SVG_NS = "{http://www.w3.org/2000/svg}"


def graph_output() -> str:
    proc = subprocess.run([sys.executable, "-m", "chainlang.cli", "graph", EXAMPLE],
                          cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def test_cli_docs_show_the_real_graph() -> None:
    page = PAGE.read_text(encoding="utf-8")
    shown = re.search(r"```text\n(flowchart TD\n.*?)```", page, re.S)
    assert shown, "the mermaid example is missing from docs/reference/cli.md"
    assert graph_output() == shown.group(1)


def test_cli_docs_show_the_rendered_graph() -> None:
    page = PAGE.read_text(encoding="utf-8")
    assert re.search(r"!\[[^\]]+\]\(\.\./assets/graph-example\.svg\)", page), (
        "docs/reference/cli.md must show the rendered graph: ![...](../assets/graph-example.svg)")


def test_rendered_graph_is_of_the_current_output() -> None:
    source = graph_output()
    root = ET.parse(SVG).getroot()  # well-formed XML, or this fails
    assert root.tag == f"{SVG_NS}svg"
    assert root.get("data-source-sha256") == sha256(source), (
        "docs/assets/graph-example.svg was rendered from another graph: render it again "
        "(see the docstring of tests/test_docs_graph.py)")
    tags = {element.tag for element in root.iter()}
    assert f"{SVG_NS}foreignObject" not in tags, "labels must be SVG text (htmlLabels: false)"
    assert f"{SVG_NS}script" not in tags
    # every word of every node label is drawn (mermaid puts each word in a <tspan> of its own)
    drawn = {word for text in root.iter(f"{SVG_NS}text") for part in text.iter() for word in (part.text or "").split()}
    for label in re.findall(r'"([^"]*)"', source):
        for word in label.replace("#quot;", '"').replace("<br/>", " ").split():
            assert word in drawn, f"{word!r} of the label {label!r} is not in the SVG"


# -- rendering (not a test: `python tests/test_docs_graph.py SCRATCH`) ------------------------

RENDER_JS = r"""
// node render.mjs SHA256 < graph.mmd > graph.svg  (mermaid and puppeteer-core in ./node_modules)
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import puppeteer from "puppeteer-core";

const require = createRequire(import.meta.url);
const source = readFileSync(0, "utf8");
const mermaidJs = readFileSync(require.resolve("mermaid/dist/mermaid.min.js"), "utf8");
const browser = await puppeteer.launch({ executablePath: process.env.CHROMIUM, args: ["--no-sandbox"] });
try {
  const page = await browser.newPage();
  await page.setContent("<!doctype html><html><body></body></html>");
  await page.addScriptTag({ content: mermaidJs });
  const svg = await page.evaluate(async (text, sha) => {
    window.mermaid.initialize({
      startOnLoad: false, securityLevel: "strict", theme: "default", handDrawnSeed: 1,
      htmlLabels: false, flowchart: { htmlLabels: false },
    });
    const { svg } = await window.mermaid.render("graph-example", text);
    const holder = document.createElement("div");
    holder.innerHTML = svg;
    document.body.appendChild(holder);
    const root = holder.querySelector("svg");
    // a fixed size instead of width="100%", so that an <img> shows it at its own size
    const box = root.viewBox.baseVal;
    root.setAttribute("width", String(Math.ceil(box.width)));
    root.setAttribute("height", String(Math.ceil(box.height)));
    root.style.removeProperty("max-width");
    if (!root.getAttribute("style")) root.removeAttribute("style");
    // the words of a label are separate <tspan>s that start with their space: keep it
    root.setAttributeNS("http://www.w3.org/XML/1998/namespace", "xml:space", "preserve");
    root.setAttribute("data-source-sha256", sha);
    return new XMLSerializer().serializeToString(root);
  }, source, process.argv[2]);
  process.stdout.write(svg);
} finally {
  await browser.close();
}
"""


def for_svg_text(source: str) -> str:
    """`source` with `<` and `>` in the quoted labels written as mermaid's #lt; and #gt;."""
    return re.sub(r'"[^"\n]*"', lambda m: m.group(0).replace("<", "#lt;").replace(">", "#gt;"), source)


def render(scratch: Path) -> None:
    chromium = os.environ.get("CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        sys.exit("no chromium found: install it, or set CHROMIUM to a Chrome/Chromium executable")
    version = json.loads((scratch / "node_modules" / "mermaid" / "package.json").read_text(encoding="utf-8"))["version"]
    source = graph_output()
    script = scratch / "render.mjs"
    script.write_text(RENDER_JS.lstrip(), encoding="utf-8")
    proc = subprocess.run(["node", str(script), sha256(source)], input=for_svg_text(source), cwd=scratch,
                          env={**os.environ, "CHROMIUM": chromium}, capture_output=True, text=True, timeout=300)
    if proc.returncode != 0 or not proc.stdout.startswith("<svg"):
        sys.exit(f"rendering failed:\n{proc.stderr}")
    SVG.parent.mkdir(parents=True, exist_ok=True)
    SVG.write_text(
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f"<!-- The output of `chainlang graph {EXAMPLE}`, rendered with mermaid {version}\n"
        "     (htmlLabels: false) by tests/test_docs_graph.py; data-source-sha256 is the sha256\n"
        "     of that output. Do not edit: render it again. -->\n"
        f"{proc.stdout}\n",
        encoding="utf-8",
    )
    print(f"wrote {SVG.relative_to(REPO)} (mermaid {version})")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python tests/test_docs_graph.py SCRATCH  (a directory where npm installed mermaid and puppeteer-core)")
    render(Path(sys.argv[1]).resolve())
