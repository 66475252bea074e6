"""JAX's persistent compilation cache, as the commands use it."""

from __future__ import annotations

import contextlib
import os
import pathlib
import sys

from ._errors import CommandError

_HITS = "/jax/compilation_cache/cache_hits"
# JAX records this event when it writes an entry (a program it had to compile).
_WRITES = "/jax/compilation_cache/cache_misses"


def default_compile_cache() -> pathlib.Path:
    """``$XDG_CACHE_HOME/jaxmb/xla``, else ``~/.cache/jaxmb/xla``."""
    base = os.environ.get("XDG_CACHE_HOME") or pathlib.Path.home() / ".cache"
    return pathlib.Path(base) / "jaxmb" / "xla"


def use_compile_cache(choice: str | None) -> str | None:
    """Point JAX's persistent compilation cache at `choice` for this process.

    A command is a process of its own, so its compiled programs are kept on disk and
    the next run of the same command loads them instead of compiling again (an
    OpenSim model's muscle paths compile for minutes; tracing, which no cache saves,
    is a fraction of that). `None` takes ``JAX_COMPILATION_CACHE_DIR`` if it is set,
    else ``$XDG_CACHE_HOME/jaxmb/xla`` (``~/.cache/jaxmb/xla``); ``"none"`` switches
    the cache off. A folder the user named that cannot be used is an error; an
    unusable default is a note on stderr, and no cache.

    JAX stores only programs whose XLA compilation took at least
    ``jax_persistent_cache_min_compile_time_secs`` (1 s by default). A command's main
    program spends most of its start-up in tracing and lowering, so its XLA compile
    alone can fall under that threshold and would never be stored: with the cache on,
    the threshold and the minimum entry size are set to 0 (every program is stored),
    unless the user set ``JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS`` or
    ``JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES``.

    **Returns:** the folder in use, or None.
    """
    import jax

    if choice is not None and choice.lower() == "none":
        jax.config.update("jax_compilation_cache_dir", None)
        return None
    source = "--compile-cache"
    if choice is None:
        choice, source = jax.config.jax_compilation_cache_dir, "JAX_COMPILATION_CACHE_DIR"
        if not choice:
            choice, source = str(default_compile_cache()), None
    # JAX would only warn, at every program, when it cannot use the folder: say it once, here.
    try:
        pathlib.Path(choice).mkdir(parents=True, exist_ok=True)
        writable = os.access(choice, os.W_OK)
        reason = "it is not writable"
    except OSError as err:
        writable, reason = False, err.strerror or str(err)
    if not writable:
        if source:
            raise CommandError(f"{source} {choice}: cannot use this folder ({reason}); pass a writable "
                               "folder to --compile-cache, or 'none' to compile without a cache.")
        print(f"jaxmb: note: no compilation cache: cannot use {choice} ({reason}); "
              "pass --compile-cache DIR to keep compiled programs elsewhere.", file=sys.stderr)
        jax.config.update("jax_compilation_cache_dir", None)
        return None
    jax.config.update("jax_compilation_cache_dir", choice)
    if "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS" not in os.environ:
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    if "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES" not in os.environ:
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    return choice


class CacheCounter:
    """Counts the programs a command loaded from and wrote to the compilation cache
    (through JAX's monitoring events) while it is entered."""

    def __init__(self):
        self.loaded = 0
        self.stored = 0

    def _listen(self, event: str, **kwargs):
        if event == _HITS:
            self.loaded += 1
        elif event == _WRITES:
            self.stored += 1

    def __enter__(self):
        import jax

        jax.monitoring.register_event_listener(self._listen)
        return self

    def __exit__(self, *exc):
        import jax

        with contextlib.suppress(Exception):
            jax.monitoring.unregister_event_listener(self._listen)
        return False

    def describe(self, folder: str | None) -> str:
        if folder is None:
            return "off"
        return f"{folder} ({self.loaded} programs loaded, {self.stored} stored)"
