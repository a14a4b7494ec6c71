# The thesis's own raw measurements (../shared/thesis-data) → tidy CSVs → the paper's figures.
THESIS_FIGURE_NAMES = ["pps_vs_payload", "bandwidth_vs_payload", "loss_vs_load", "rtt_lb_vs_none",
                       "rtt_under_load"]
THESIS_FIGURES = [f"figures/thesis/{n}.{ext}" for n in THESIS_FIGURE_NAMES for ext in ("png", "pdf")]


rule thesis_ingest:
    """Steady-state rates, loss and RTT samples from the thesis raw data (results/thesis/)."""
    input:
        THESIS_DATA,
    output:
        directory("results/thesis"),
    log:
        "results/logs/thesis_ingest.log",
    shell:
        "{XB} ingest thesis {input} --out {output} 2> {log}"


rule thesis_figures:
    input:
        rules.thesis_ingest.output,
    output:
        THESIS_FIGURES,
    log:
        "results/logs/thesis_figures.log",
    shell:
        "{XB} plot {input} --out figures/thesis 2> {log}"
