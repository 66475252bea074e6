"""``jaxmb moment-arms MODEL.osim --coordinate NAME --out DIR``."""

from __future__ import annotations

import pathlib

from ._cache import CacheCounter
from ._errors import CommandError, UsageError
from ._progress import Stages


def check_model_file(path: str) -> pathlib.Path:
    """`path` as a readable file, else a :class:`CommandError` naming it."""
    file = pathlib.Path(path)
    if not file.exists():
        raise CommandError(f"{path}: no such model file")
    if not file.is_file():
        raise CommandError(f"{path}: not a model file (a folder?)")
    return file


def check_out_folder(path: str) -> pathlib.Path:
    """`path` as an output folder that can be made, else a :class:`UsageError` naming ``--out``."""
    out = pathlib.Path(path)
    if out.exists() and not out.is_dir():
        raise UsageError(f"argument --out: {path} exists and is not a folder")
    return out


def moment_arms(args) -> int:
    from ..io import moment_arm_report

    model = check_model_file(args.model)
    check_out_folder(args.out)
    stages = ["loading the model", "compiling and computing the moment arms", "writing"]
    with CacheCounter() as cache, Stages(stages, args.progress) as progress:
        moment_arm_report(model, args.coordinate, args.out, n=args.n, stages=progress)
    print(f"compilation cache: {cache.describe(args.compile_cache)}")
    return 0
