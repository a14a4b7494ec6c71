# The thesis's own raw measurements (../shared/thesis-data) → tidy CSVs → the paper's figures.
# results/thesis/ is committed, so the figures can be drawn where the raw data is absent.
THESIS_FIGURE_FILES = [f"figures/thesis/{n}.{ext}" for n in THESIS_FIGURES for ext in ("png", "pdf")]
THESIS_TIDY = [f"results/thesis/{k}.csv" for k in ("pps", "loss", "rtt_samples", "rtt_summary")]


rule thesis_ingest:
    """Steady-state rates, loss and RTT samples from the thesis raw data."""
    input:
        THESIS_DATA if os.path.isdir(THESIS_DATA) else [],
    output:
        THESIS_TIDY,
        # every raw file used or listed with why it was skipped or refused; labels, clock skew
        provenance="results/thesis/provenance.json",
    log:
        "results/logs/thesis_ingest.log",
    conda:
        CONDA_ENV
    params:
        xb=XB,
    shell:
        "{params.xb} ingest thesis {input:q} --out results/thesis 2> {log:q}"


rule thesis_figures:
    input:
        rules.thesis_ingest.output,
    output:
        [
            (
                report(
                    f,
                    caption=caption("thesis_figure", Path(f).stem),
                    category="thesis data",
                    subcategory="the thesis's own raw measurements",
                    labels={"figure": Path(f).stem, "testbed": "thesis"},
                )
                if f.endswith(".png")
                else f
            )
            for f in THESIS_FIGURE_FILES
        ],
    log:
        "results/logs/thesis_figures.log",
    conda:
        CONDA_ENV
    params:
        xb=XB,
    shell:
        "{params.xb} plot results/thesis --out figures/thesis --testbed thesis 2> {log:q}"


rule thesis_compare:
    """Published vs reproduced from the thesis raw data."""
    input:
        rules.thesis_ingest.output,
    output:
        "results/thesis/compare.json",
    log:
        "results/logs/thesis_compare.log",
    conda:
        CONDA_ENV
    params:
        xb=XB,
    shell:
        "{params.xb} compare results/thesis --json > {output:q} 2> {log:q}"
