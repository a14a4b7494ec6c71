"""xenobench: reproduce the XenoFlow (BlueField-3 DOCA Flow LB) measurements end to end."""

from pathlib import Path

__version__ = "0.1.0"

#: root of the source checkout (config/, lb/, ebpf_baseline/, ... live here)
REPO_ROOT = Path(__file__).resolve().parent.parent
