"""Progress on stderr while a command compiles and computes (tqdm)."""

from __future__ import annotations

import sys
import threading


class Stages:
    """A tqdm bar over a command's named stages, on stderr.

    The bar names the stage under way and its elapsed time, refreshed twice a second
    by a background thread, so that a compilation of minutes shows that it is alive.
    `enabled=None` shows it when stderr is a terminal.

    **Arguments:**

    - `stages`: the names of the stages, in order.
    - `enabled`: True, False, or None (stderr is a terminal).
    """

    def __init__(self, stages: list[str], enabled: bool | None = None):
        self.stages = list(stages)
        self.enabled = sys.stderr.isatty() if enabled is None else bool(enabled)
        self._bar = None
        self._stop = threading.Event()
        self._thread = None

    def __enter__(self):
        if self.enabled:
            from tqdm import tqdm

            self._bar = tqdm(total=len(self.stages), file=sys.stderr, leave=False, dynamic_ncols=True,
                             bar_format="jaxmb: {desc} [{elapsed}] {n_fmt}/{total_fmt}")
            self._thread = threading.Thread(target=self._refresh, daemon=True)
            self._thread.start()
        return self

    def _refresh(self):
        while not self._stop.wait(0.5):
            bar = self._bar
            if bar is not None:
                bar.refresh()

    def start(self, stage: str):
        """Show `stage` (one of `stages`) as the one under way."""
        if self._bar is not None:
            done = self.stages.index(stage) if stage in self.stages else self._bar.n
            self._bar.n = done
            self._bar.set_description_str(f"{stage}...", refresh=True)

    def detail(self, text: str):
        """Add `text` (e.g. "32/181 states") to the stage under way."""
        if self._bar is not None:
            stage = self.stages[min(self._bar.n, len(self.stages) - 1)]
            self._bar.set_description_str(f"{stage}... {text}", refresh=True)

    def __exit__(self, *exc):
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self._bar is not None:
            self._bar.n = len(self.stages)
            self._bar.close()
            self._bar = None
        return False
