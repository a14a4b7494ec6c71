rule testbed_check:
    """Bring the testbed up and prove its connectivity (client → backends, VIP → backend MACs)."""
    output:
        f"results/{TESTBED}/testbed_check.txt",
    log:
        f"results/{TESTBED}/logs/testbed_check.log",
    conda:
        CONDA_ENV
    params:
        xb=XB,
    shell:
        "({params.xb} testbed up && {params.xb} testbed check) > {output}.tmp 2> {log} && mv {output}.tmp {output}"
