"""The command line of the benchmark scripts: their positional arguments stay optional and in the
order their docstrings' Usage lines give, with --help (the docstring) and a clear refusal of a bad
value instead of a traceback. Imported by the scripts next to it (scripts/ is on sys.path when
one of them runs)."""

from __future__ import annotations

import argparse
from pathlib import Path


def _checked(kind, what: str, ok, rule: str):
    """An argparse type: `kind` of the text, refused naming the value unless ok(value)."""
    def convert(text: str):
        try:
            v = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None
        if not ok(v):
            raise argparse.ArgumentTypeError(f"{text!r} {rule}")
        return v
    return convert


positive_int = _checked(int, "a whole number", lambda v: v >= 1, "must be at least 1")
non_negative_int = _checked(int, "a whole number", lambda v: v >= 0, "must be 0 or more")
positive_float = _checked(float, "a number", lambda v: 0 < v < float("inf"), "must be a finite number above 0")
existing_dir = _checked(Path, "a path", Path.is_dir, "is not a directory")
existing_file = _checked(Path, "a path", Path.is_file, "is not a file")


def parse(doc: str, *args: tuple, argv: list[str] | None = None) -> argparse.Namespace:
    """args: (NAME, type, default, help) per optional positional argument, in order; the result
    has them as lower-case attributes (ROUNDS -> .rounds)."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    for name, kind, default, text in args:
        ap.add_argument(name.lower(), metavar=name, type=kind, nargs="?", default=default,
                        help=f"{text} (default: {default})")
    return ap.parse_args(argv)
