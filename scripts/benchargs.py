"""The command line of the benchmark scripts: their positional arguments stay optional and in the
order their docstrings' Usage lines give, with --help (the docstring) and a clear refusal of a bad
value instead of a traceback. Imported by the scripts next to it (scripts/ is on sys.path when
one of them runs)."""

from __future__ import annotations

import argparse
from pathlib import Path


def positive_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be at least 1")
    return v


def positive_float(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 < v < float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} must be a finite number above 0")
    return v


def non_negative_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if v < 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be 0 or more")
    return v


def existing_dir(text: str) -> Path:
    p = Path(text)
    if not p.is_dir():
        raise argparse.ArgumentTypeError(f"{text!r} is not a directory")
    return p


def existing_file(text: str) -> Path:
    p = Path(text)
    if not p.is_file():
        raise argparse.ArgumentTypeError(f"{text!r} is not a file")
    return p


def parse(doc: str, *args: tuple, argv: list[str] | None = None) -> argparse.Namespace:
    """args: (NAME, type, default, help) per optional positional argument, in order; the result
    has them as lower-case attributes (ROUNDS -> .rounds)."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    for name, kind, default, text in args:
        ap.add_argument(name.lower(), metavar=name, type=kind, nargs="?", default=default,
                        help=f"{text} (default: {default})")
    return ap.parse_args(argv)
