"""CLI commands of this concern (see xenobench/cli/__init__.py). Filled in by its issue."""

COMMANDS: list = []
