"""Running the documentation's examples as a reader would: a Markdown page's ```python
blocks in order in one namespace, from a folder holding the files the page names."""

import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _blocks(relative):
    return re.findall(r"```python\n(.*?)```", (ROOT / relative).read_text(), re.S)


def block_index(relative, needle):
    """The index of the first ```python block of a Markdown page that contains `needle`."""
    return next(k for k, block in enumerate(_blocks(relative)) if needle in block)


def run_page(relative, min_blocks=1, *, start=0, upto=None, namespace=None):
    """The namespace after running the ```python blocks of a Markdown page in order (blocks
    ``start`` to ``upto``, or all; in ``namespace`` to go on from an earlier call), from the
    current directory."""
    blocks = _blocks(relative)
    assert len(blocks) >= min_blocks, f"the examples of {relative} were not found"
    namespace = {} if namespace is None else namespace
    for k, block in list(enumerate(blocks))[start:upto]:
        exec(compile(block, f"{relative}, python block {k + 1}", "exec"), namespace)
    return namespace


def in_folder_with(monkeypatch, folder, files):
    """Run from ``folder``, holding links to ``files`` under their own names, as a reader
    runs a page beside the files it names."""
    for file in files:
        (folder / file.name).symlink_to(file)
    monkeypatch.chdir(folder)
