"""Small programs the harness runs on nodes (`python -m xenobench.tools.<name>`)."""
