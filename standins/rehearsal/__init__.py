"""The rehearsal lab: the thesis testbed's shape on this machine (lab.py, README.md)."""
