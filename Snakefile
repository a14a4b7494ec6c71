# xenobench workflow: `snakemake --cores 1 all` regenerates every figure.
#   default testbed: config/local.yaml (namespaces on this machine)
#   thesis testbed:  snakemake --cores 1 all --configfile config/fips.yaml
#   plan only:       snakemake -n all   (no root, no testbed needed)
#   HTML report:     snakemake --report report.html   (after a run: figures with captions, report.md)
from snakemake.utils import min_version

min_version("8.10")


report: "report/workflow.rst"


include: "rules/common.smk"
include: "rules/testbed.smk"
include: "rules/thesis.smk"
include: "rules/experiments.smk"


rule all:
    default_target: True
    input:
        all_outputs(),


onstart:
    check_root()
    interrupt_in_one_line()


onsuccess:
    testbed_down()
    closing_summary()


onerror:
    testbed_down()
