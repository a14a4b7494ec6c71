rule deploy:
    """SSH testbeds: ship the node-side agents, the BPF objects of each role and XenoFlow's source
    to the nodes (content-addressed: a node that has them gets nothing), then check every node;
    the readiness table is the output, a MISSING row fails the job (xenobench deploy)."""
    input:
        build=f"{RESULTS}/logs/build.done",
    output:
        f"{RESULTS}/deploy.txt",
    log:
        f"{RESULTS}/logs/deploy.log",
    conda:
        CONDA_ENV
    params:
        xb=XB,
    shell:
        # the readiness table into the log too when a node is not ready (the log Snakemake names)
        "{params.xb} deploy > {output}.tmp 2> {log:q} && mv {output}.tmp {output:q} "
        "|| {{ cat {output}.tmp | tee -a {log:q} >&2; rm -f {output}.tmp; exit 1; }}"


rule testbed_check:
    """Bring the testbed up and prove its connectivity (client → backends, VIP → backend MACs);
    over SSH after `deploy` has put the agents there."""
    input:
        deploy=[f"{RESULTS}/deploy.txt"] if SSH_NODES else [],
    output:
        f"{RESULTS}/testbed_check.txt",
    log:
        f"{RESULTS}/logs/testbed_check.log",
    conda:
        CONDA_ENV
    params:
        xb=XB,
    shell:
        # a failed check's rows (FAIL ... with the reason) into the log Snakemake names, and the terminal
        "({params.xb} testbed up && {params.xb} testbed check) > {output}.tmp 2> {log:q} && mv {output}.tmp {output:q} "
        "|| {{ cat {output}.tmp | tee -a {log:q} >&2; rm -f {output}.tmp; exit 1; }}"


rule trex_server:
    """The TRex server on the loadgen node, started before the first experiment job (traffic.generator
    trex); one already answering on its RPC port is reported and left alone. Stopped, its log
    collected into results/<testbed>/logs/trex_server.log, when the workflow ends (testbed_down)."""
    input:
        check=f"{RESULTS}/testbed_check.txt",
    output:
        f"{RESULTS}/trex_server.txt",
    log:
        f"{RESULTS}/logs/trex_server_start.log",
    conda:
        CONDA_ENV
    params:
        xb=XB,
    shell:
        "{params.xb} traffic server start > {output:q} 2> {log:q}"
