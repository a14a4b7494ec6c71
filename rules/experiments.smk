# The live measurements (thesis ch. 7): one job per measurement point, all its repetitions inside
# (xenobench.procedures.run_point; a repetition with result.json is never re-run), then tidy CSVs,
# figures and the run report for this testbed.


rule build:
    """The C parts the namespace testbed runs (XDP programs, XenoFlow on the DOCA Flow emulation).
    On the thesis testbed XenoFlow is built on the DPU when it is deployed (`lb start`)."""
    input:
        "scripts/build.sh",
    output:
        f"{RESULTS}/logs/build.done",
    log:
        f"{RESULTS}/logs/build.log",
    conda:
        CONDA_ENV
    shell:
        "scripts/build.sh > {log:q} 2>&1 && touch {output:q}"


rule experiment_point:
    """All repetitions of one measurement point; prints one line per trial attempt."""
    input:
        check=rules.testbed_check.output,
        # SSH testbeds: the nodes hold the agents (a missing record, as after `testbed down --purge`,
        # deploys again: Snakemake does not re-run testbed_check for an input it lost)
        deploy=[f"{RESULTS}/deploy.txt"] if SSH_NODES else [],
        build=rules.build.output,
        trex=[f"{RESULTS}/trex_server.txt"] if USES_TREX else [],
        # rtt_load's capacity levels: the points measuring each LB's maximum run first
        capacity=point_inputs,
    output:
        str(TREE.point_summary("{experiment}", "{point}")),
    log:
        f"{RESULTS}/logs/{{experiment}}/{{point}}.log",
    conda:
        CONDA_ENV
    params:
        xb=XB,
        # the point's configuration as a digest: Snakemake runs the point again when it changed
        point_key=lambda w: POINT_KEYS[(w.experiment, w.point)],
    shell:
        # both streams append to the one log (a truncating `> {log}` beside `tee -a` wrote the final
        # JSON over the progress lines); the progress lines also go to the terminal
        ": > {log:q}; {params.xb} experiment run {wildcards.experiment} {wildcards.point} >> {log:q} 2> >(tee -a {log:q} >&2)"


rule aggregate:
    """Tidy CSVs of the valid trials, and invalid.csv listing the others with their reasons."""
    input:
        point_outputs(),
    output:
        f"{RESULTS}/tidy.json",
    log:
        f"{RESULTS}/logs/aggregate.log",
    conda:
        CONDA_ENV
    params:
        xb=XB,
        results=lambda w, output: os.path.dirname(output[0]),
    shell:
        "{params.xb} experiment aggregate --planned-only {params.results:q} > {output:q} 2> {log:q}"


rule figures:
    """The figures of this testbed (FIGURE_NAMES; a figure without valid data says so instead)."""
    input:
        rules.aggregate.output,
    output:
        # the PNGs in `snakemake --report` (the PDFs are the same figures), by experiment with a caption
        [
            (
                report(
                    f"{FIGURES}/{n}.png",
                    caption=caption("figure", n),
                    category=figure_category(n),
                    subcategory=experiment_title(figure_category(n)),
                    labels={"figure": n, "testbed": TESTBED},
                )
                if ext == "png"
                else f"{FIGURES}/{n}.{ext}"
            )
            for n in FIGURE_NAMES
            for ext in ("png", "pdf")
        ],
    log:
        f"{RESULTS}/logs/figures.log",
    conda:
        CONDA_ENV
    params:
        xb=XB,
        results=lambda w, input: os.path.dirname(input[0]),
        figures=lambda w, output: os.path.dirname(output[0]),
        testbed=TESTBED,
    shell:
        "{params.xb} plot {params.results:q} --out {params.figures:q} --testbed {params.testbed:q} --placeholders > /dev/null 2> {log:q}"


rule report:
    """results/<testbed>/report.md and .html: the run's header, figures, invalid trials, wall times,
    published vs reproduced."""
    input:
        figures=rules.figures.output,
        tidy=rules.aggregate.output,
        thesis=rules.thesis_compare.output,
    output:
        md=f"{RESULTS}/report.md",
        tex=f"{RESULTS}/report.tex",  # the headline and published-vs-reproduced tables (booktabs)
        html=report(
            f"{RESULTS}/report.html",
            caption="../report/run_report.rst",
            category="run report",
            labels={"document": "report.md as HTML", "testbed": TESTBED},
        ),
    log:
        f"{RESULTS}/logs/report.log",
    conda:
        CONDA_ENV
    params:
        xb=XB,
        results=lambda w, output: os.path.dirname(output.md),
        figures=lambda w, input: os.path.dirname(input.figures[0]),
    shell:
        "{params.xb} experiment report {params.results:q} --figures {params.figures:q} --thesis-compare {input.thesis:q} "
        "--out {output.md:q} > /dev/null 2> {log:q}"
