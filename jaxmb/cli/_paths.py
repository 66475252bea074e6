"""Checks of the files and folders a command is given, before it computes anything."""

from __future__ import annotations

import os
import pathlib

from ._errors import CommandError, UsageError

# The examples the command line builds by name (jaxmb.models).
BUILT_IN_MODELS = ("double-pendulum", "three-link-arm", "planar-chain")


def check_model_file(path: str, kind: str = "model") -> pathlib.Path:
    """`path` as a readable file, else a :class:`CommandError` naming it (a `kind` file)."""
    file = pathlib.Path(path)
    if not file.exists():
        raise CommandError(f"{path}: no such {kind} file")
    if not file.is_file():
        raise CommandError(f"{path}: not a {kind} file (a folder?)")
    return file


def check_out_folder(path: str) -> pathlib.Path:
    """`path` as an output folder that can be made, else a :class:`UsageError` naming ``--out``."""
    if not str(path).strip():  # pathlib reads "" as the current folder
        raise UsageError("argument --out: give a folder name (an empty one would write into the current folder)")
    out = pathlib.Path(path)
    if out.exists() and not out.is_dir():
        raise UsageError(f"argument --out: {path} exists and is not a folder")
    # The folder is made after the computation: check now that it can be. (`abspath`
    # resolves ".." lexically, so that the walk below stays on the path's own folders.)
    target = pathlib.Path(os.path.abspath(out))
    parent = target
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise UsageError(f"argument --out: cannot make {path}: {parent} is not a folder")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise UsageError(f"argument --out: cannot make or write {path}: {parent} is not writable")
    if not out.exists():
        # Permission bits do not tell everything (root on /proc, a read-only mount): make
        # the folders now and take them away again, so that a failed run leaves none.
        try:
            target.mkdir(parents=True)
        except OSError as e:
            raise UsageError(f"argument --out: cannot make {path}: {e.strerror or e}") from None
        made = target
        while made != parent and made != made.parent:
            try:
                made.rmdir()
            except OSError:  # something else wrote there meanwhile: leave it
                break
            made = made.parent
    return out


def chain_links(args) -> int:
    """``--n`` of a built-in model: planar-chain's number of links (default 7); given for
    another model it would be ignored, so it is a :class:`UsageError`."""
    if args.n is not None and args.model != "planar-chain":
        raise UsageError(f"argument --n: the number of links is for planar-chain, not {args.model}")
    return 7 if args.n is None else args.n
