"""The digest of what a point is measured for (xenobench.experiments.point_key), which the workflow
hands to the point's job so that Snakemake runs the point again when it changed."""

import pytest

from xenobench.config import DEFAULT_CONFIG, load_config
from xenobench.experiments import point_key, points

# (experiment the edit is in, the edit as an experiments: mapping, does rank's point change)
EDITS = [
    ("rank", "{rank: {rounds: 3}}", True),                  # a size of its own
    ("rank", "{rank: {repetitions: 5}}", True),             # one more repetition to measure
    ("rank", "{settle_s: 0.3}", True),                      # a setting every experiment shares
    ("pps", "{pps: {rounds: 3}}", False),                   # another experiment's size
    ("pps", "{repetitions: 5}", False),                     # the study's count: rank has its own
]


def _rank_key(cfg):
    (pt,) = points(cfg, "rank")
    return point_key(cfg, "rank", pt)


@pytest.mark.parametrize("where, edit, changes", EDITS)
def test_a_points_key_changes_exactly_with_what_it_is_measured_for(tmp_path, where, edit, changes):
    base = load_config(DEFAULT_CONFIG)
    f = tmp_path / "c.yaml"
    f.write_text(f"extends: {DEFAULT_CONFIG}\nexperiments: {edit}\n")
    assert (_rank_key(load_config(f)) != _rank_key(base)) is changes


def test_every_point_has_a_key_of_its_own():
    cfg = load_config(DEFAULT_CONFIG)
    keys = [point_key(cfg, "rtt_load", p) for p in points(cfg, "rtt_load")]
    assert len(set(keys)) == len(keys) and _rank_key(cfg) == _rank_key(load_config(DEFAULT_CONFIG))


def test_the_workflow_hands_the_key_to_every_point_job():
    """The rule's params name it; Snakemake's params trigger then runs a changed point again
    (checked by hand with `snakemake -n`: "Params have changed since last execution")."""
    from xenobench import REPO_ROOT
    rule = (REPO_ROOT / "rules" / "experiments.smk").read_text().split("rule experiment_point:")[1].split("\nrule ")[0]
    assert "point_key=lambda w: POINT_KEYS[(w.experiment, w.point)]" in rule
