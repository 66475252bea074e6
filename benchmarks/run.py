"""Run every benchmark and regenerate the headline table of benchmarks/README.md.

    python -m benchmarks [--quick] [--only dynamics,closed_chains] [--no-readme]
    python benchmarks/run.py [--quick] ...

Each script writes ``benchmarks/results/<name>.json`` and ``<name>.md``; this command
also writes ``benchmarks/results/headline.md`` and puts the same table between the
``headline`` markers of benchmarks/README.md and of the repository's README.md
(``--no-readme`` leaves both alone).
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks import _harness as H  # noqa: E402  (sets XLA flags and x64 before jax)

SCRIPTS = ("dynamics", "closed_chains", "muscles", "gradients", "batches")
README = H.ROOT / "benchmarks" / "README.md"
READMES = (README, H.ROOT / "README.md")  # one table, the same in both, never edited by hand
START, END = "<!-- headline:start -->", "<!-- headline:end -->"


def headline_table(results: dict) -> str:
    rows = [r for name in SCRIPTS if name in results for r in results[name].get("headline", [])]
    metas = [results[n]["meta"] for n in SCRIPTS if n in results]
    m = metas[0] if metas else H.meta("headline")
    head = (f"{m['device_kind']} ({m['backend']}, {m['cpu_count']} CPUs), {m['dtype']}, {m['clock']} time, jax "
            f"{m['versions'].get('jax')}, XLA_FLAGS={m['xla_flags']!r}, commit {m['commit']}, {m['date'][:10]}"
            + (", --quick" if m.get("quick") else ""))
    return head + "\n\n" + H.markdown_table(rows, [("what", "what"), ("jaxmb", "jaxmb"),
                                                   ("alternative", "the alternative, same run"), ("script", "script")])


def update_readme(table: str, path: Path = README) -> None:
    text = path.read_text()
    start, end = text.index(START) + len(START), text.index(END)
    path.write_text(text[:start] + "\n" + table + "\n" + text[end:])


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="each script's smoke configuration (minutes, not hours)")
    p.add_argument("--only", help=f"comma-separated subset of {','.join(SCRIPTS)}")
    p.add_argument("--no-readme", action="store_true", help="do not rewrite the READMEs' headline tables")
    p.add_argument("--out-dir", default=str(H.RESULTS))
    a = p.parse_args(argv)
    names = tuple(a.only.split(",")) if a.only else SCRIPTS
    results = {}
    for name in names:
        if name not in SCRIPTS:
            p.error(f"unknown benchmark {name!r}")
        t = time.perf_counter()
        print(f"== bench_{name}", flush=True)
        results[name] = importlib.import_module(f"benchmarks.bench_{name}").run(quick=a.quick, out_dir=a.out_dir)
        print(f"== bench_{name}: {time.perf_counter() - t:.0f} s", flush=True)
    table = headline_table(results)
    Path(a.out_dir).mkdir(parents=True, exist_ok=True)
    (Path(a.out_dir) / "headline.md").write_text(table + "\n")
    print("\n" + table)
    if not a.no_readme:
        for path in READMES:
            update_readme(table, path)
            print(f"updated {path.relative_to(H.ROOT)}")


if __name__ == "__main__":
    main()
